// SPDX-License-Identifier: MIT
// Sample 4: PyTorch's
//     model = nn.DataParallel(model)            # every GPU
//     model = nn.DataParallel(model, device_ids=[0, 1])
// in C++, over devices of any backends: each batch is split over them, every
// replica runs at once, and the gradients are summed onto the model.
//   usage: 04_data_parallel [DEVICES] [DATA_DIR] [LIMIT]
//   DEVICES: comma-separated, e.g. cuda:0,vulkan:0,cpu (default: every GPU,
//   else the CPU)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mlp.h"
#include "switchyard/switchyard.h"

namespace sy = switchyard;

int main(int argc, char** argv) {
  std::vector<std::string> names;  // "cuda:0,vulkan:0,cpu" -> three names
  for (std::string list = argc > 1 ? argv[1] : ""; !list.empty();) {
    size_t e = std::min(list.find(','), list.size());
    if (e > 0) names.push_back(list.substr(0, e));
    list.erase(0, e + 1);
  }
  std::string dir = argc > 2 ? argv[2] : sy::data::FashionMNIST::kDefaultDir;
  int64_t limit = argc > 3 ? std::atoll(argv[3]) : 10000;
  try {
    sy::manual_seed(0);
    auto model = sy::models::mlp({784, 256, 128, 10});
    // The wrapper holds the model on its first device; its parameters are
    // the model's, so the optimizer is built over them as usual.
    auto net = names.empty() ? std::make_shared<sy::nn::DataParallel>(model)
                             : std::make_shared<sy::nn::DataParallel>(model, names);
    sy::Device& out = net->output_device();  // where outputs are gathered
    sy::optim::Adam opt(net->parameters(), 1e-3f);

    auto train = std::make_shared<sy::data::FashionMNIST>(dir, /*train=*/true, limit);
    sy::data::DataLoader loader(train, {.batch_size = 128, .shuffle = true, .seed = 0});
    double total = 0;
    int64_t n = 0;
    for (const auto& batch : loader) {
      // The input stays where it is: DataParallel moves each device's rows.
      sy::Tensor y = batch.target.to(out);
      opt.zero_grad();
      sy::Tensor loss = sy::cross_entropy((*net)(batch.data), y);
      loss.backward();
      opt.step();
      total += loss.item() * double(batch.data.size(0));
      n += batch.data.size(0);
    }
    std::string over;
    for (sy::Device* d : net->devices()) over += (over.empty() ? "" : ", ") + d->str();
    auto st = net->stats();
    std::printf("DataParallel over %s: loss %.4f, %.1f MB moved between devices per step\n",
                over.c_str(), total / double(n),
                double(st.bytes_moved) / double(st.steps ? st.steps : 1) / 1e6);

    // Evaluation, split over the devices too (no autograd).
    sy::NoGradGuard no_grad;
    sy::data::FashionMNIST test(dir, /*train=*/false, 2000);
    sy::data::DataLoader test_loader(std::make_shared<sy::data::FashionMNIST>(test),
                                     {.batch_size = 500});
    int64_t correct = 0, seen = 0;
    for (const auto& batch : test_loader) {
      auto pred = sy::argmax((*net)(batch.data)).to_vector<int32_t>();
      auto truth = batch.target.to_vector<int32_t>();
      for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == truth[i];
      seen += int64_t(pred.size());
    }
    std::printf("test accuracy %.4f\n", double(correct) / double(seen));
    return 0;
  } catch (const sy::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
