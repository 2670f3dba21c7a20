// SPDX-License-Identifier: MIT
// Internal to `switchyard bench`: a workload, and the layer workloads that
// live in their own file (workloads_nn.cpp).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "switchyard/backend/device.h"
#include "switchyard/backend/program.h"

namespace switchyard::bench {

// A workload: what one run does on a device, and how much work that is.
struct Prepared {
  std::function<void()> run;  // one run, finished (synchronized) on return
  double work = 0;            // per run, in the unit's numerator (FLOP, bytes, samples)
  std::function<void()> cleanup;
};
struct Workload {
  std::string group, name, unit;
  double scale = 1e-9;  // unit = work * scale / seconds
  double flop_per_unit = 0;
  std::function<bool(BackendDevice&)> applies = [](BackendDevice&) { return true; };
  std::function<Prepared(BackendDevice&)> prepare;
};

// The launch of a custom kernel (switchyard/custom.h) doing the built-in
// relu's work, y = max(x, 0) over n floats (n a multiple of 4), compiled for
// `d` (or loaded from the caches) first: what a cached custom kernel costs
// next to the built-in one.
Instr custom_relu_launch(BackendDevice& d, int64_t n);

// conv2d forward and forward + backward at the CNN's shapes (group "conv").
std::vector<Workload> conv_workloads();
// A training step of the CNN (models/cnn.h) at batch 128 (group "model").
std::vector<Workload> cnn_workloads();

}  // namespace switchyard::bench
