// SPDX-License-Identifier: MIT
// autocast's thread-local dtype and GradScaler (switchyard/amp.h). The op
// lists themselves are in the ops (ops.cpp, ops_nn.cpp: autocast_dtype()).
#include "switchyard/amp.h"

#include <cmath>
#include <map>

#include "ops_internal.h"
#include "switchyard/error.h"
#include "switchyard/ops.h"

namespace switchyard {
namespace {
thread_local std::optional<DType> t_autocast;
}  // namespace

autocast::autocast(DType dtype, bool enabled) : prev_(t_autocast) {
  SY_CHECK(!enabled || is_half(dtype), "autocast",
           "expected a 16-bit floating dtype (bf16 or f16), found ", dtype_name(dtype));
  t_autocast = enabled ? std::optional<DType>(dtype) : std::nullopt;
}

autocast::~autocast() { t_autocast = prev_; }

std::optional<DType> autocast_dtype() { return t_autocast; }

namespace detail {
AutocastOff::AutocastOff() : prev_(t_autocast) { t_autocast.reset(); }
AutocastOff::~AutocastOff() { t_autocast = prev_; }
}  // namespace detail

GradScaler::GradScaler() : GradScaler(Options{}) {}

GradScaler::GradScaler(Options o) : o_(o), scale_(o.init_scale) {
  SY_CHECK(o.init_scale > 0 && std::isfinite(o.init_scale), "GradScaler",
           "expected a positive finite init_scale, found ", o.init_scale);
  SY_CHECK(o.growth_factor > 1, "GradScaler", "expected growth_factor > 1, found ",
           o.growth_factor);
  SY_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, "GradScaler",
           "expected backoff_factor in (0, 1), found ", o.backoff_factor);
  SY_CHECK(o.growth_interval >= 1, "GradScaler", "expected growth_interval >= 1, found ",
           o.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  SY_CHECK(loss.defined(), "GradScaler.scale", "expected a defined loss");
  return o_.enabled ? mul(loss, scale_) : loss;
}

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!o_.enabled) return;
  SY_CHECK(!step_.count(&opt), "GradScaler.unscale_",
           "expected one unscale_() per optimizer and step, found a second before update()");
  NoGradGuard no_grad;
  detail::AutocastOff off;
  // Per device: the count of non-finite gradient values (exact below 2^24,
  // and any count > 0 is all that matters).
  std::map<Device*, Tensor> bad;
  const float inv = 1.f / scale_;
  for (Tensor p : opt.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor n = sum(detail::nonfinite(g));
    Tensor& b = bad[&g.device()];
    b = b.defined() ? add(b, n) : n;
    p.set_grad(mul(g, inv));
  }
  PerOptimizer& s = step_[&opt];
  for (auto& [d, b] : bad) s.found_inf = s.found_inf || b.item() != 0.f;  // one read per device
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!o_.enabled) {
    opt.step();
    return true;
  }
  if (!step_.count(&opt)) unscale_(opt);
  PerOptimizer& s = step_[&opt];
  SY_CHECK(!s.stepped, "GradScaler.step",
           "expected one step() per optimizer before update(), found a second");
  s.stepped = true;
  if (s.found_inf) {
    ++skipped_;
    return false;
  }
  opt.step();
  return true;
}

void GradScaler::update() {
  if (!o_.enabled) return;
  SY_CHECK(!step_.empty(), "GradScaler.update",
           "expected a step() (or unscale_()) since the last update(), found none");
  found_inf_ = false;
  for (auto& [opt, s] : step_) found_inf_ = found_inf_ || s.found_inf;
  step_.clear();
  if (found_inf_) {
    scale_ *= o_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == o_.growth_interval) {
    const float grown = scale_ * o_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;  // PyTorch keeps a scale that would overflow
    growth_tracker_ = 0;
  }
}

NamedTensors GradScaler::state_dict() const {
  if (!o_.enabled) return {};
  return {{"scale", full({}, scale_)},
          {"_growth_tracker", from_vector(std::vector<int64_t>{growth_tracker_}, {})}};
}

void GradScaler::load_state_dict(const NamedTensors& state) {
  float s = 0;
  int64_t tracker = -1;
  for (auto& [name, t] : state) {
    SY_CHECK(t.defined() && t.numel() == 1, "GradScaler.load_state_dict",
             "expected scalars, found '", name, "' of shape ",
             t.defined() ? shape_str(t.shape()) : "undefined");
    if (name == "scale")
      s = t.item();
    else if (name == "_growth_tracker")
      tracker = int64_t(t.item());
    else
      throw Error(
          detail::cat("[GradScaler.load_state_dict] expected 'scale' and "
                      "'_growth_tracker', found '",
                      name, "'"));
  }
  SY_CHECK(s > 0 && std::isfinite(s) && tracker >= 0, "GradScaler.load_state_dict",
           "expected a positive scale and a growth tracker >= 0, found ", s, " and ", tracker);
  scale_ = s;
  growth_tracker_ = tracker;
}

}  // namespace switchyard
