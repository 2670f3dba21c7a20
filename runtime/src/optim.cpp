// SPDX-License-Identifier: MIT
// Optimizers: fused in-place update kernels, one launch a step for all the
// parameters where the device has the multi-tensor kernel (else one per
// parameter).
#include "switchyard/optim.h"

#include <algorithm>
#include <unordered_set>

#include "graph.h"
#include "switchyard/error.h"

namespace switchyard::optim {
using namespace detail;

Optimizer::Optimizer(std::vector<Tensor> params) {
  // A parameter listed twice (shared weights) is updated once, as in PyTorch.
  std::unordered_set<const void*> seen;
  for (auto& p : params)
    if (!p.defined() || seen.insert(p.impl()).second) params_.push_back(p);
  for (auto& p : params_) {
    SY_CHECK(p.defined() && p.requires_grad(), "optimizer",
             "expected parameters that require grad, found one that does not");
    SY_CHECK(p.is_leaf(), "optimizer", "expected leaf tensors as parameters, found a result of ",
             "an op");
    SY_CHECK(p.dtype() == DType::f32, "optimizer",
             "expected f32 parameters (the optimizers update f32 weights; keep the model in f32 "
             "and run its layers in bf16/f16), found a parameter of dtype ",
             dtype_name(p.dtype()), " and shape ", shape_str(p.shape()));
  }
}

void Optimizer::zero_grad() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : params_) p.zero_grad();
}

void Optimizer::sync_state_devices() {
  std::lock_guard<std::mutex> lock(mu_);
  sync_state_devices_locked();
}

void Optimizer::sync_state_devices_locked() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i)
    for (Tensor* s : state(i))
      if (s->defined() && &s->device() != &params_[i].device())
        s->set_data(s->to(params_[i].device()));
}

void Optimizer::step() {
  std::lock_guard<std::mutex> lock(mu_);
  NoGradGuard no_grad;
  sync_state_devices_locked();
  // When nothing read values back since this optimizer's last step, run that
  // step now so the pending graph (and the memory it holds) stays bounded.
  // Other optimizers' fresh updates are left alone (no extra submission).
  std::unordered_set<Context*> ctxs;
  for (auto& p : params_) {
    auto graph = lock_graph(p);  // another thread's evaluation may run these
    NodePtr n = node_of(p);
    for (auto& d : n->deps)
      if (d->pending()) ctxs.insert(n->ctx);
  }
  for (Context* c : ctxs) evaluate(*c, {});
  // Check every gradient before queuing any update: all or nothing.
  for (auto& p : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    SY_CHECK(&g.device() == &p.device(), "optimizer.step",
             "expected the gradient on the parameter's device ", p.device().str(), ", found ",
             g.device().str());
    SY_CHECK(g.shape() == p.shape(), "optimizer.step", "expected a gradient of shape ",
             shape_str(p.shape()), ", found ", shape_str(g.shape()));
    check_updatable("optimizer.step", p);
  }
  std::vector<size_t> idx;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    idx.push_back(i);
    grads.push_back(std::move(g));
  }
  update_all(idx, grads);
  ++steps_;
}

void Optimizer::update_all(const std::vector<size_t>& idx, const std::vector<Tensor>& grads) {
  for (size_t k = 0; k < idx.size(); ++k) update(idx[k], params_[idx[k]], grads[k]);
}

NamedTensors Optimizer::state_dict() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& self = const_cast<Optimizer&>(*this);  // state() hands out pointers
  NamedTensors out;
  const auto names = state_names();
  for (size_t i = 0; i < params_.size(); ++i) {
    auto st = self.state(i);
    for (size_t k = 0; k < st.size(); ++k)
      if (st[k]->defined()) out.emplace_back(cat("state.", i, ".", names[k]), *st[k]);
  }
  return out;
}

void Optimizer::load_state_dict(const NamedTensors& saved, int64_t steps) {
  const char* op = "optimizer.load_state_dict";
  std::lock_guard<std::mutex> lock(mu_);
  SY_CHECK(steps >= 0, op, "expected steps >= 0, found ", steps);
  const auto names = state_names();
  // (parameter, buffer) -> value, every name and shape checked first.
  std::vector<std::vector<Tensor>> values(params_.size(), std::vector<Tensor>(names.size()));
  std::string problems;
  for (auto& [name, t] : saved) {
    size_t i = 0, k = names.size();
    bool parsed = false;
    if (name.rfind("state.", 0) == 0) {
      size_t dot = name.find('.', 6);
      std::string idx = name.substr(6, dot == std::string::npos ? 0 : dot - 6);
      if (!idx.empty() && idx.size() < 10 && (idx == "0" || idx[0] != '0') &&
          idx.find_first_not_of("0123456789") == std::string::npos) {
        i = size_t(std::stoul(idx));
        auto it = std::find(names.begin(), names.end(), name.substr(dot + 1));
        k = size_t(it - names.begin());
        parsed = i < params_.size() && k < names.size();
      }
    }
    if (!parsed) {
      problems += cat(problems.empty() ? "" : "; ", "unexpected '", name, "'");
      continue;
    }
    const Shape want = state_shape(i, k);
    if (!t.defined() || t.shape() != want || t.dtype() != DType::f32) {
      problems += cat(problems.empty() ? "" : "; ", "'", name, "': expected shape ",
                      shape_str(want), " f32, found ",
                      t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype())
                                  : std::string("undefined"));
      continue;
    }
    if (values[i][k].defined()) {
      problems += cat(problems.empty() ? "" : "; ", "'", name, "' twice");
      continue;
    }
    values[i][k] = t;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    size_t have = 0;
    for (auto& v : values[i]) have += v.defined();
    if (have != 0 && have != names.size())
      problems += cat(problems.empty() ? "" : "; ", "parameter ", i, " has ", have, " of its ",
                      names.size(), " state buffers");
  }
  SY_CHECK(problems.empty(), op, "expected the state of this optimizer's ", params_.size(),
           " parameters, found: ", problems);
  // Fresh copies on each parameter's device, made before anything changes.
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i)
    for (auto& v : values[i])
      if (v.defined()) v = copy_to(v, params_[i].device());
  for (size_t i = 0; i < params_.size(); ++i) {
    auto st = state(i);
    for (size_t k = 0; k < st.size(); ++k) *st[k] = values[i][k];
  }
  steps_ = steps;
}

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params)), o_(o) {
  SY_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0, "SGD",
           "expected non-negative lr, momentum and weight_decay, found lr=", o.lr,
           " momentum=", o.momentum, " weight_decay=", o.weight_decay);
  SY_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD",
           "Nesterov momentum expects momentum > 0 and dampening = 0");
  lr_ = o.lr;
  momentum_.resize(params_.size());
}

std::vector<Tensor*> SGD::state(size_t i) { return {&momentum_[i]}; }

void SGD::update(size_t i, Tensor& p, const Tensor& g) {
  if (o_.momentum == 0.f) {
    update_inplace({&p}, {g},
                   SgdParams{.n = p.numel(), .lr = lr_, .weight_decay = o_.weight_decay});
    return;
  }
  const bool first = !momentum_[i].defined();
  // A new buffer becomes state only once its first update is recorded.
  Tensor buf = first ? zeros(p.shape(), p.device()) : momentum_[i];
  SgdMomentumParams k{.n = p.numel(),
                      .nesterov = o_.nesterov,
                      .first_step = first,
                      .lr = lr_,
                      .momentum = o_.momentum,
                      .dampening = o_.dampening,
                      .weight_decay = o_.weight_decay};
  update_inplace({&p, &buf}, {g}, k);
  momentum_[i] = buf;
}

namespace {
// The device of a step's parameters when a multi-tensor launch `k` can
// update them all: two or more, on one device that has the kernel; else
// null (one launch per parameter).
Device* multi_device(const std::vector<Tensor>& params, const std::vector<size_t>& idx, Kernel k) {
  if (idx.size() < 2) return nullptr;
  Device& d = params[idx[0]].device();
  for (size_t i : idx)
    if (&params[i].device() != &d) return nullptr;
  return context_of(d).device->supports(k) ? &d : nullptr;
}
}  // namespace

// One sgd_multi launch when every parameter of the step is on one device
// and all or none of their momentum buffers exist (the launch's first_step
// is one flag): fresh buffers made first, then p (and buf) of each
// parameter written and the gradients read, in the kernel's order.
void SGD::update_all(const std::vector<size_t>& idx, const std::vector<Tensor>& grads) {
  Device* one = o_.foreach ? multi_device(params_, idx, Kernel::sgd_multi) : nullptr;
  if (!one) return Optimizer::update_all(idx, grads);
  const bool has_buf = o_.momentum != 0.f, first = has_buf && !momentum_[idx[0]].defined();
  for (size_t i : idx)
    if (has_buf && momentum_[i].defined() == first) return Optimizer::update_all(idx, grads);
  Device& d = *one;
  const size_t T = idx.size();
  std::vector<Tensor> buf(T);
  std::vector<Tensor*> targets;
  targets.reserve(2 * T);
  for (size_t k = 0; k < T; ++k) {
    Tensor& p = params_[idx[k]];
    targets.push_back(&p);
    if (!has_buf) continue;
    buf[k] = first ? zeros(p.shape(), d) : momentum_[idx[k]];
    targets.push_back(&buf[k]);
  }
  std::vector<Tensor> reads;
  reads.reserve(T);
  for (const Tensor& g : grads) reads.push_back(g.detach());
  update_inplace(targets, reads,
                 SgdMultiParams{.tensors = int64_t(T),
                                .has_buf = has_buf,
                                .nesterov = o_.nesterov,
                                .first_step = first,
                                .lr = lr_,
                                .momentum = o_.momentum,
                                .dampening = o_.dampening,
                                .weight_decay = o_.weight_decay});
  if (has_buf)  // buffers only once the update is recorded
    for (size_t k = 0; k < T; ++k) momentum_[idx[k]] = buf[k];
}

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Optimizer(std::move(params)), o_(o) {
  SY_CHECK(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0, "Adam",
           "expected non-negative lr, eps and weight_decay, found lr=", o.lr, " eps=", o.eps,
           " weight_decay=", o.weight_decay);
  SY_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "Adam",
           "expected betas in [0, 1), found ", o.beta1, ", ", o.beta2);
  lr_ = o.lr;
  m_.resize(params_.size());
  v_.resize(params_.size());
  step_.resize(params_.size());
}

std::vector<Tensor*> Adam::state(size_t i) { return {&m_[i], &v_[i], &step_[i]}; }

// One adam_multi launch when every parameter of the step is on one device
// that has the kernel: fresh state made first, then p, m, v, step of each
// parameter written and the gradients read, in the kernel's order.
void Adam::update_all(const std::vector<size_t>& idx, const std::vector<Tensor>& grads) {
  Device* one = o_.foreach ? multi_device(params_, idx, Kernel::adam_multi) : nullptr;
  if (!one) return Optimizer::update_all(idx, grads);
  Device& d = *one;
  const size_t T = idx.size();
  std::vector<Tensor> m(T), v(T), step(T);
  std::vector<Tensor*> targets;
  targets.reserve(4 * T);
  for (size_t k = 0; k < T; ++k) {
    const size_t i = idx[k];
    const bool fresh = !m_[i].defined();
    Tensor& p = params_[i];
    m[k] = fresh ? zeros(p.shape(), d) : m_[i];
    v[k] = fresh ? zeros(p.shape(), d) : v_[i];
    step[k] = fresh ? zeros({1}, d) : step_[i];
    for (Tensor* t : {&p, &m[k], &v[k], &step[k]}) targets.push_back(t);
  }
  std::vector<Tensor> reads;
  reads.reserve(T);
  for (const Tensor& g : grads) reads.push_back(g.detach());
  update_inplace(targets, reads,
                 AdamMultiParams{.tensors = int64_t(T),
                                 .decoupled = o_.decoupled,
                                 .lr = lr_,
                                 .beta1 = o_.beta1,
                                 .beta2 = o_.beta2,
                                 .eps = o_.eps,
                                 .weight_decay = o_.weight_decay});
  for (size_t k = 0; k < T; ++k) {  // state only once the update is recorded
    m_[idx[k]] = m[k];
    v_[idx[k]] = v[k];
    step_[idx[k]] = step[k];
  }
}

void Adam::update(size_t i, Tensor& p, const Tensor& g) {
  // New state becomes the optimizer's only once both updates are recorded.
  const bool fresh = !m_[i].defined();
  Tensor m = fresh ? zeros(p.shape(), p.device()) : m_[i];
  Tensor v = fresh ? zeros(p.shape(), p.device()) : v_[i];
  Tensor step = fresh ? zeros({1}, p.device()) : step_[i];
  // step += 1, on the device (no per-step scalar changes)
  Tensor before = step;
  update_inplace({&step}, {before.detach()}, AffineParams{.n = 1, .scale = 1.f, .shift = 1.f});
  AdamParams k{.n = p.numel(),
               .decoupled = o_.decoupled,
               .lr = lr_,
               .beta1 = o_.beta1,
               .beta2 = o_.beta2,
               .eps = o_.eps,
               .weight_decay = o_.weight_decay};
  update_inplace({&p, &m, &v}, {g, step.detach()}, k);
  m_[i] = m;
  v_[i] = v;
  step_[i] = step;
}

}  // namespace switchyard::optim
