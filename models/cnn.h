// SPDX-License-Identifier: MIT
// Image classifiers beyond the MLP, for 28x28 single-channel images given as
// rows of 784 pixels (Fashion-MNIST as the DataLoader yields it).
#pragma once
#include <memory>

#include "switchyard/nn.h"

namespace switchyard::models {

// Three conv blocks (3x3 conv, batch norm, ReLU, 2x2 max pool: 32, 64 then
// 128 channels; 28x28 -> 14x14 -> 7x7 -> 3x3), then dropout,
// Linear(1152, 128), ReLU, dropout, Linear(128, 10).
std::shared_ptr<nn::Sequential> cnn(Device& d = cpu());

}  // namespace switchyard::models
