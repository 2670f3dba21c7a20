// SPDX-License-Identifier: MIT
// Datasets and the DataLoader. Datasets return host (cpu) tensors; the
// training loop moves each batch to its device.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "switchyard/tensor.h"

namespace switchyard::data {

struct Batch {
  Tensor data;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Gathers the samples at `indices` into one batch (on the cpu).
  virtual Batch get_batch(std::span<const int64_t> indices) const = 0;
};

// Rows of `data` paired with rows of `targets` (both on the cpu).
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor data, Tensor targets);
  int64_t size() const override { return n_; }
  Batch get_batch(std::span<const int64_t> indices) const override;

 private:
  Shape data_shape_, target_shape_;
  DType data_dtype_, target_dtype_;
  std::vector<char> data_host_, target_host_;  // host copies, gathered per batch
  int64_t n_ = 0;
  size_t data_row_ = 0, target_row_ = 0;
};

// An IDX file (the MNIST family's format), gzip-compressed or not.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // unsigned bytes (type 0x08)
};
IdxArray read_idx(const std::string& path);

// Samples to run a model on, as an (N, features) f32 cpu tensor: IDX
// images (bytes, normalized as FashionMNIST normalizes them) or a NumPy
// .npy array (float32 taken as it is; uint8 normalized like the images).
Tensor read_samples(const std::string& path);

// Fashion-MNIST from Debian's dataset-fashion-mnist package (IDX .gz files).
// Images are kept as bytes and normalized per batch to
// (x/255 - 0.2860) / 0.3530, shape (B, 784) f32; labels (B) i32.
class FashionMNIST : public Dataset {
 public:
  static constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";
  FashionMNIST(const std::string& dir, bool train, int64_t limit = -1);
  int64_t size() const override { return n_; }
  Batch get_batch(std::span<const int64_t> indices) const override;

 private:
  std::vector<uint8_t> images_, labels_;
  int64_t n_ = 0;
  int64_t pixels_ = 0;
};

// For training over several processes (DistributedDataParallel): rank
// `rank` of `num_replicas` takes its share of every batch. Every rank walks
// the same order (the loader's seed and epoch, so the shuffle is shared and
// changes each epoch) in batches of batch_size, the global batch, and keeps
// rows [rank * n / R, (rank + 1) * n / R) of each, rounded so that shares
// differ by at most one row: the ranks together see exactly the batches one
// process would, whatever their number, so a model without batch
// statistics (no BatchNorm) trains over R ranks as in one process with the
// same batch_size. (PyTorch's sampler strides the order and batch_size is
// per rank instead.) A last batch with fewer rows than ranks is dropped, so
// that every rank has rows in every step.
struct DistributedSampler {
  int num_replicas = 1;
  int rank = 0;
};

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = false;  // as PyTorch's DataLoader
  uint64_t seed = 0;
  bool drop_last = false;
  bool prefetch = true;             // prepare the next batch on a background thread
  bool pin_memory = false;          // batches in pinned memory (Tensor::pin_memory)
  Device* pin_device = nullptr;     // whose pinned memory; nullptr: the first GPU's
  DistributedSampler sampler = {};  // this process's share of each batch
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> ds, LoaderOptions o);
  int64_t num_batches() const;
  const Dataset& dataset() const { return *ds_; }

  struct Epoch;
  class Iterator {
   public:
    Iterator() = default;
    explicit Iterator(std::shared_ptr<Epoch> e);
    const Batch& operator*() const { return current_; }
    const Batch* operator->() const { return &current_; }
    Iterator& operator++();
    bool operator==(const Iterator& o) const { return done() == o.done(); }

   private:
    bool done() const { return !epoch_; }
    std::shared_ptr<Epoch> epoch_;
    Batch current_;
  };
  // Each begin() starts a new epoch with a new shuffle (seed + epoch number).
  Iterator begin();
  Iterator end() { return Iterator(); }
  // The next begin() starts epoch `e` (counted from 0), as after e epochs:
  // a resumed run sees the shuffles an uninterrupted one would.
  void set_epoch(uint64_t e) { epoch_ = e; }
  // The sample order of epoch `e` (for tests and reproducibility).
  std::vector<int64_t> order(uint64_t epoch) const;

 private:
  std::shared_ptr<const Dataset> ds_;
  LoaderOptions o_;
  uint64_t epoch_ = 0;
};

}  // namespace switchyard::data
