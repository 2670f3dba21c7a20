// SPDX-License-Identifier: MIT
// Optimizers. Each step is one fused in-place update kernel per parameter,
// or (Adam and AdamW on the CPU and CUDA backends) one launch for every
// parameter of the step, recorded lazily and run with the rest of the
// training step.
#pragma once
#include <mutex>
#include <string>
#include <vector>

#include "switchyard/serialize.h"
#include "switchyard/tensor.h"

namespace switchyard::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  // Threads may share one optimizer: step() and zero_grad() take its lock.
  void zero_grad();  // drops gradients (set_to_none)
  void step();
  // Moves optimizer state to the device of each parameter (step() does this
  // by itself after model.to(device)).
  void sync_state_devices();
  float lr() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lr_;
  }
  void set_lr(float lr) {
    std::lock_guard<std::mutex> lock(mu_);
    lr_ = lr;
  }
  const std::vector<Tensor>& params() const { return params_; }
  int64_t steps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_;
  }

  // The per-parameter state with PyTorch's names, "state.<i>.<buffer>" for
  // the i-th parameter (Adam: exp_avg, exp_avg_sq, step; SGD with momentum:
  // momentum_buffer), only for parameters that have stepped. With
  // load_state_dict, what checkpoints save: a resumed run steps exactly as
  // an uninterrupted one. Loading copies onto each parameter's device;
  // unknown names or wrong shapes are one error, and nothing is changed.
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& saved, int64_t steps);

 protected:
  virtual void update(size_t i, Tensor& p, const Tensor& g) = 0;
  // The step's updates: the parameters listed (those with a gradient, in
  // order), each with its gradient. One update() each unless overridden.
  virtual void update_all(const std::vector<size_t>& idx, const std::vector<Tensor>& grads);
  virtual std::vector<Tensor*> state(size_t i) = 0;          // per-parameter tensors
  virtual std::vector<std::string> state_names() const = 0;  // same order as state(i)
  virtual Shape state_shape(size_t i, size_t /*k*/) const { return params_[i].shape(); }
  std::vector<Tensor> params_;
  float lr_ = 1e-3f;
  int64_t steps_ = 0;

 private:
  void sync_state_devices_locked();
  mutable std::mutex mu_;
};

struct SGDOptions {
  float lr = 0.01f, momentum = 0.f, dampening = 0.f, weight_decay = 0.f;
  bool nesterov = false;
  // One launch for all the parameters of a step (sgd_multi), as PyTorch's
  // foreach; else one per parameter. The same values either way.
  bool foreach = true;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions o);
  SGD(std::vector<Tensor> params, float lr) : SGD(std::move(params), SGDOptions{.lr = lr}) {}

 private:
  void update(size_t i, Tensor& p, const Tensor& g) override;
  void update_all(const std::vector<size_t>& idx, const std::vector<Tensor>& grads) override;
  std::vector<Tensor*> state(size_t i) override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  SGDOptions o_;
  std::vector<Tensor> momentum_;  // defined once the parameter has stepped
};

struct AdamOptions {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.f;
  bool decoupled = false;  // AdamW
  // One launch for all the parameters of a step (adam_multi), as PyTorch's
  // foreach; else one per parameter.
  // The same values either way.
  bool foreach = true;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions o);
  Adam(std::vector<Tensor> params, float lr) : Adam(std::move(params), AdamOptions{.lr = lr}) {}

 private:
  void update(size_t i, Tensor& p, const Tensor& g) override;
  void update_all(const std::vector<size_t>& idx, const std::vector<Tensor>& grads) override;
  std::vector<Tensor*> state(size_t i) override;
  std::vector<std::string> state_names() const override {
    return {"exp_avg", "exp_avg_sq", "step"};
  }
  Shape state_shape(size_t i, size_t k) const override {
    return k == 2 ? Shape{1} : params_[i].shape();
  }
  AdamOptions o_;
  std::vector<Tensor> m_, v_, step_;  // step_: per-parameter count, on device
};

// Adam with decoupled weight decay (default 0.01, as PyTorch).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions o) : Adam(std::move(params), with_decay(o)) {}
  AdamW(std::vector<Tensor> params, float lr)
      : AdamW(std::move(params), AdamOptions{.lr = lr, .weight_decay = 1e-2f}) {}

 private:
  static AdamOptions with_decay(AdamOptions o) {
    o.decoupled = true;
    return o;
  }
};

}  // namespace switchyard::optim
