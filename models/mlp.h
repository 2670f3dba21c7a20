// SPDX-License-Identifier: MIT
// MLP builder: "784-256-128-10" -> Linear/ReLU stack (no activation at the end).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "switchyard/nn.h"

namespace switchyard::models {

enum class Activation { relu, gelu, tanh, sigmoid };

// sizes: input, hidden..., output (at least two entries).
std::shared_ptr<nn::Sequential> mlp(const std::vector<int64_t>& sizes,
                                    Activation act = Activation::relu, Device& d = cpu());
// Parses "784-256-128-10" (or commas) into sizes.
std::vector<int64_t> parse_sizes(const std::string& spec);

}  // namespace switchyard::models
