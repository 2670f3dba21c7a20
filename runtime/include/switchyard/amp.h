// SPDX-License-Identifier: MIT
// Mixed precision, as PyTorch's torch.autocast and torch.amp.GradScaler.
//
//   sy::autocast guard(sy::bf16);        // this thread, until the guard ends
//   Tensor loss = sy::cross_entropy(model->forward(x), y);  // GEMMs in bf16, the loss in f32
//   loss.backward();                     // each op's backward in its forward's dtypes
//   opt.step();                          // f32 parameters, updated in f32
//
// fp16 needs loss scaling (its exponent is 5 bits: small gradients flush to
// zero); bf16 has f32's exponent and needs none:
//
//   sy::GradScaler scaler;
//   scaler.scale(loss).backward();
//   scaler.step(opt);                    // skipped when a gradient is inf or NaN
//   scaler.update();
#pragma once
#include <cstdint>
#include <map>
#include <optional>

#include "switchyard/dtype.h"
#include "switchyard/optim.h"
#include "switchyard/tensor.h"

namespace switchyard {

// Within the scope, on this thread, ops run in the dtypes of PyTorch's
// autocast lists:
// - in `dtype` (bf16 or f16): matmul, linear (nn::Linear), bmm, conv2d
//   (nn::Conv2d): their floating inputs are cast to it (f32 weights stay
//   f32 master copies; the cast's gradient flows back to them in f32);
// - in f32: softmax, log_softmax, cross_entropy, mse_loss, layer_norm,
//   sum, exp and log: 16-bit inputs are widened, the result f32;
// - the others (relu, add, pooling, dropout, batch_norm...) in their
//   inputs' dtype, mixed dtypes promoted to the wider (f32).
// backward() runs outside autocast: each op's backward in the dtypes its
// forward chose. Scopes nest; `enabled = false` turns autocast off inside.
class autocast {
 public:
  explicit autocast(DType dtype = DType::bf16, bool enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  std::optional<DType> prev_;
};
// The autocast dtype on this thread; empty outside a scope.
std::optional<DType> autocast_dtype();

// Dynamic loss scaling (torch.amp.GradScaler's rules): the loss is
// multiplied by the scale before backward(); step() divides the gradients
// by it and steps only when every gradient is finite. update() then halves
// the scale after an overflow (backoff_factor) or doubles it after
// growth_interval steps without one (growth_factor).
class GradScaler {
 public:
  struct Options {
    float init_scale = 65536.f;
    float growth_factor = 2.f;
    float backoff_factor = 0.5f;
    int64_t growth_interval = 2000;
    bool enabled = true;  // false: scale() and unscale_() do nothing, step() steps
  };
  GradScaler();
  explicit GradScaler(Options o);

  // loss * scale (the loss unchanged when disabled).
  Tensor scale(const Tensor& loss) const;
  // Divides the gradients of the optimizer's parameters by the scale and
  // checks them for inf and NaN (on the device, on the bits of each value);
  // step() calls it unless called already since the last update(). Once
  // per optimizer and step.
  void unscale_(optim::Optimizer& opt);
  // opt.step() unless one of its gradients was inf or NaN; returns whether
  // it stepped. Reads one flag back from each device (a wait, as PyTorch's).
  // Once per optimizer and step: several optimizers share one scaler.
  bool step(optim::Optimizer& opt);
  // The next scale: backed off when any optimizer's gradients overflowed
  // since the last update(), grown after growth_interval clean steps.
  void update();

  float get_scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool found_inf() const { return found_inf_; }  // the last update()'s finding
  int64_t skipped_steps() const { return skipped_; }
  // For checkpoints: the scale and the growth tracker ("scale",
  // "_growth_tracker", PyTorch's keys), as f32 and i64 scalars (nothing
  // when disabled). load_state_dict checks everything before it changes
  // anything.
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& state);

 private:
  struct PerOptimizer {
    bool found_inf = false, stepped = false;
  };
  Options o_;
  float scale_;
  int64_t growth_tracker_ = 0, skipped_ = 0;
  bool found_inf_ = false;
  // The optimizers unscaled since the last update(), and what each found.
  std::map<const optim::Optimizer*, PerOptimizer> step_;
};

}  // namespace switchyard
