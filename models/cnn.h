// Image classifiers beyond the MLP, for 28x28 single-channel images given as
// rows of 784 pixels (Fashion-MNIST as the DataLoader yields it).
#pragma once
#include <memory>

#include "switchyard/nn.h"

namespace switchyard::models {

// Two conv blocks (3x3 conv, batch norm, ReLU, 2x2 max pool: 32 then 64
// channels), then dropout, Linear(3136, 128), ReLU, dropout, Linear(128, 10).
std::shared_ptr<nn::Sequential> cnn(Device& d = cpu());

}  // namespace switchyard::models
