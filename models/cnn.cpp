// SPDX-License-Identifier: MIT
// See cnn.h.
#include "cnn.h"

namespace switchyard::models {

std::shared_ptr<nn::Sequential> cnn(Device& d) {
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<nn::Unflatten>(std::vector<int64_t>{1, 28, 28}));
  int64_t in = 1;
  for (int64_t out : {32, 64, 128}) {  // 28x28 -> 14x14 -> 7x7 -> 3x3
    // No conv bias: the batch norm after it has its own.
    m->add(std::make_shared<nn::Conv2d>(in, out, 3, 1, 1, 1, 1, false, d));
    m->add(std::make_shared<nn::BatchNorm2d>(out, 1e-5f, 0.1f, true, d));
    m->add(std::make_shared<nn::ReLU>());
    m->add(std::make_shared<nn::MaxPool2d>(2));
    in = out;
  }
  m->add(std::make_shared<nn::Flatten>());
  m->add(std::make_shared<nn::Dropout>(0.25f));
  m->add(std::make_shared<nn::Linear>(128 * 3 * 3, 128, true, d));
  m->add(std::make_shared<nn::ReLU>());
  m->add(std::make_shared<nn::Dropout>(0.25f));
  m->add(std::make_shared<nn::Linear>(128, 10, true, d));
  return m;
}

}  // namespace switchyard::models
