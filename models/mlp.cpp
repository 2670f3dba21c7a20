// SPDX-License-Identifier: MIT
// The MLP builder used by the CLI, samples, tests and benchmarks.
#include "mlp.h"

#include "switchyard/error.h"

namespace switchyard::models {

std::shared_ptr<nn::Sequential> mlp(const std::vector<int64_t>& sizes, Activation act, Device& d) {
  SY_CHECK(sizes.size() >= 2, "mlp", "expected at least input and output sizes, found ",
           sizes.size(), " size(s)");
  auto net = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    net->add(std::make_shared<nn::Linear>(sizes[i], sizes[i + 1], true, d));
    if (i + 2 == sizes.size()) break;
    switch (act) {
      case Activation::relu:
        net->add(std::make_shared<nn::ReLU>());
        break;
      case Activation::gelu:
        net->add(std::make_shared<nn::GELU>());
        break;
      case Activation::tanh:
        net->add(std::make_shared<nn::Tanh>());
        break;
      case Activation::sigmoid:
        net->add(std::make_shared<nn::Sigmoid>());
        break;
    }
  }
  return net;
}

std::vector<int64_t> parse_sizes(const std::string& spec) {
  std::vector<int64_t> out;
  std::string cur;
  auto flush = [&] {
    SY_CHECK(!cur.empty(), "mlp", "expected sizes like 784-256-10, found '", spec, "'");
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(cur, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    SY_CHECK(used == cur.size() && v > 0, "mlp", "expected positive integer sizes, found '", cur,
             "' in '", spec, "'");
    out.push_back(v);
    cur.clear();
  };
  for (char c : spec) {
    if (c == '-' || c == ',')
      flush();
    else
      cur += c;
  }
  flush();
  return out;
}

}  // namespace switchyard::models
