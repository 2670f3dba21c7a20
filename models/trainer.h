// Training an MLP classifier on Fashion-MNIST: the CLI's main job, also used
// by tests and benchmarks.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "switchyard/data.h"

namespace switchyard::models {

struct TrainConfig {
  std::string device = "auto";
  int epochs = 5;
  int64_t batch = 128;
  float lr = 1e-3f;
  std::string opt = "adam";  // sgd (momentum 0.9) | adam | adamw
  std::vector<int64_t> hidden = {256, 128};
  uint64_t seed = 0;
  std::string data_dir = data::FashionMNIST::kDefaultDir;
  int64_t limit = -1;             // first N training samples
  int64_t test_limit = -1;        // first N test samples
  int record_losses = 50;         // keep the first N step losses
  bool stop_on_nonfinite = true;  // a NaN or infinite loss is an error (else train on)
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
};

// progress(epoch, batch_index, num_batches, running_loss)
using Progress = std::function<void(int, int64_t, int64_t, double)>;
using EpochDone = std::function<void(const EpochStats&)>;

TrainResult train_fashion_mnist(const TrainConfig& cfg, const Progress& progress = nullptr,
                                const EpochDone& epoch_done = nullptr);

}  // namespace switchyard::models
