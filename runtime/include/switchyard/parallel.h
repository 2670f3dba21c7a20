// SPDX-License-Identifier: MIT
// Data parallelism in one process: nn::DataParallel runs one model over
// several devices, of any backends (a CUDA GPU beside a Vulkan GPU, or a GPU
// beside the CPU), splitting each batch along dim 0.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "switchyard/nn.h"

namespace switchyard::nn {

struct DataParallelOptions {
  // How each batch is split: `equal` shards (as PyTorch's scatter), or
  // `measured`: the first steps are timed per device and the batch is then
  // split in proportion to each device's measured speed.
  enum class Balance { equal, measured };
  Balance balance = Balance::equal;
  // measured: the steps timed (after one untimed warm-up step); they run
  // the devices one after the other, so each device's time is its own.
  int measure_steps = 3;
  // Where outputs are gathered (the loss is computed there); default: the
  // first device, which also holds the model.
  Device* output_device = nullptr;
  // Builds a replica of the model (on the CPU; its values are replaced by
  // the model's). Default: rebuilt from the model's spec(), which the
  // built-in layers and Sequential have; a model without one needs this.
  std::function<std::shared_ptr<Module>()> replicate;
};

// What a DataParallel step spent and moved, for benchmarks and the CLI.
struct DataParallelStats {
  int64_t steps = 0;           // forward() calls
  uint64_t bytes_moved = 0;    // parameters broadcast and gradients reduced, between devices
  double comm_seconds = 0;     // wall time spent moving them (waits included)
  double step_seconds = 0;     // wall time of forward() and the backward through it
  std::vector<int64_t> shard;  // the last batch's split, per device
  std::vector<double> speed;   // measured samples/s per device (balance = measured)
};

// PyTorch's nn.DataParallel: wraps a model; forward() splits the batch
// along dim 0, runs a replica of the model on every device at once (each
// device's work submitted before any is waited on), and gathers the outputs
// on the output device. backward() through the output runs every replica's
// backward at once and sums their gradients into the model's parameters,
// so they equal the full batch's gradient. An optimizer over parameters()
// (the model's, on the first device) steps them; the next forward() copies
// the stepped values to the replicas. The model is moved to the first
// device. Its state_dict names are "module." + the model's, as PyTorch's.
class DataParallel : public Module {
 public:
  // devices: empty means every usable GPU, or the CPU when there is none.
  DataParallel(std::shared_ptr<Module> module, std::vector<Device*> devices = {},
               DataParallelOptions o = {});
  DataParallel(std::shared_ptr<Module> module, const std::vector<std::string>& devices,
               DataParallelOptions o = {});
  // DataParallel(model, {"cuda:0", "vulkan:0", "cpu"}).
  DataParallel(std::shared_ptr<Module> module, std::initializer_list<const char*> devices,
               DataParallelOptions o = {})
      : DataParallel(std::move(module), std::vector<std::string>(devices.begin(), devices.end()),
                     std::move(o)) {}
  ~DataParallel() override;
  Tensor forward(const Tensor& x) override;

  Module& module() { return *module_; }
  const std::vector<Device*>& devices() const;
  Device& output_device() const { return *output_; }
  // The split of a batch of `batch` rows over devices() (0: left out).
  std::vector<int64_t> shard_sizes(int64_t batch) const;
  DataParallelStats stats() const;

  struct State;

 private:
  std::shared_ptr<Module> module_;
  Device* output_ = nullptr;
  std::shared_ptr<State> state_;
};

}  // namespace switchyard::nn
