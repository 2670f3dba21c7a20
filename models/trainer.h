// SPDX-License-Identifier: MIT
// Training a classifier (an MLP or a CNN) on Fashion-MNIST: the CLI's main job, also used
// by tests and benchmarks.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "switchyard/data.h"
#include "switchyard/nn.h"

namespace switchyard::models {

struct TrainConfig {
  std::string device = "auto";
  int epochs = 5;
  int64_t batch = 128;
  float lr = 1e-3f;
  std::string opt = "adam";                  // sgd (momentum 0.9) | adam | adamw
  std::string model = "mlp";                 // mlp | cnn (models/cnn.h) | vit (models/vit.h)
  std::vector<int64_t> hidden = {256, 128};  // the MLP's hidden layers
  uint64_t seed = 0;
  std::string data_dir = data::FashionMNIST::kDefaultDir;
  int64_t limit = -1;             // first N training samples
  int64_t test_limit = -1;        // first N test samples
  int record_losses = 50;         // keep the first N step losses
  bool stop_on_nonfinite = true;  // a NaN or infinite loss is an error (else train on)
  // FILE.safetensors: the final model (a model file, for nn::load and
  // `switchyard eval`). Anything else is a directory: a checkpoint after
  // every epoch (checkpoint.h) and the model as DIR/model.safetensors.
  std::string save;
  // Mixed precision: fp32, bf16 (forward under sy::autocast(bf16)) or fp16
  // (autocast(f16) and a GradScaler). Parameters and optimizer state stay
  // f32; evaluation runs under the same autocast.
  std::string precision = "fp32";
  // The dtype the model file's weights are stored in (f32, or bf16/f16 for
  // a file half the size); checkpoints keep f32, so a resume is exact.
  DType save_dtype = DType::f32;
  // A checkpoint directory to continue from (and to keep saving to, unless
  // `save` names another place): epochs run from the checkpoint's + 1 to
  // `epochs`, exactly as the uninterrupted run would.
  std::string resume;
  // Data parallelism in one process (nn::DataParallel): the batch split over
  // these devices each step, `balance` equal or measured. Empty: `device`.
  std::vector<std::string> devices;
  std::string balance = "equal";
  // Across processes (DistributedDataParallel over the process group, which
  // the caller has initialized): each rank trains on its share of every
  // batch of `batch` rows on one device, `device` resolved by local rank
  // (auto: the local_rank-th GPU, else the CPU). Rank 0 alone reports
  // progress, evaluates and writes checkpoints.
  bool distributed = false;
};

struct EpochStats {
  int epoch = 0;
  double loss = 0, test_acc = 0, samples_per_s = 0, seconds = 0;
};

struct TrainResult {
  std::string device;
  std::vector<EpochStats> epochs;
  std::vector<float> first_losses;
  double train_samples_per_s = 0, test_acc = 0, final_loss = 0;
  int64_t train_samples = 0, steps = 0;
  // Per training step after warm-up (the first two steps), on the training
  // device (not measured for DataParallel): kernel launches and the bytes
  // their arguments span (Counters::kernel_bytes).
  double launches_per_step = 0, kernel_bytes_per_step = 0;
  // The same steps per kernel (indexed by Kernel): launches, argument bytes
  // and FLOPs, summed over the counted steps.
  std::vector<uint64_t> step_launches, step_bytes, step_flops;
  int first_epoch = 1;                // > 1 when resumed
  std::string resumed_from;           // the checkpoint used
  std::vector<std::string> warnings;  // damaged checkpoints skipped on resume
  // Parallel runs: the devices the batch was split over, how it was split
  // at the end, and what moving data between devices (or ranks) cost.
  std::vector<std::string> devices;
  std::vector<int64_t> shard;
  int world_size = 1;
  double comm_seconds = 0;          // moving parameters, gradients, activations
  double exposed_comm_seconds = 0;  // of which not hidden behind compute
  double bytes_per_step = 0;        // between devices or ranks, per step
  // The training device's peak memory in use (Counters::peak_bytes_in_use,
  // from the first step on; not measured for DataParallel).
  double peak_device_bytes = 0;
  // fp16: steps the GradScaler skipped (inf or NaN gradients), its last scale.
  int64_t skipped_steps = 0;
  float loss_scale = 0;
};

// Accuracy and mean cross-entropy of `model` on `ds` (batches of 1000, in
// order), what training reports after each epoch and `switchyard eval` prints.
struct EvalResult {
  double accuracy = 0, loss = 0;
  int64_t samples = 0;
};
EvalResult evaluate(nn::Module& model, const data::Dataset& ds, Device& dev);

// progress(epoch, batch_index, num_batches, running_loss)
using Progress = std::function<void(int, int64_t, int64_t, double)>;
using EpochDone = std::function<void(const EpochStats&)>;

TrainResult train_fashion_mnist(const TrainConfig& cfg, const Progress& progress = nullptr,
                                const EpochDone& epoch_done = nullptr);

}  // namespace switchyard::models
