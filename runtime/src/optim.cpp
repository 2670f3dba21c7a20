// Optimizers: one fused in-place update kernel per parameter per step.
#include "switchyard/optim.h"

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
  }
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

void Optimizer::sync_state_devices() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i)
    for (Tensor* s : state(i))
      if (s->defined() && &s->device() != &params_[i].device())
        s->set_data(s->to(params_[i].device()));
}

void Optimizer::step() {
  NoGradGuard no_grad;
  sync_state_devices();
  // When nothing read values back since this optimizer's last step, run that
  // step now so the pending graph (and the memory it holds) stays bounded.
  // Other optimizers' fresh updates are left alone (no extra submission).
  std::unordered_set<Context*> ctxs;
  for (auto& p : params_) {
    Node& n = *node_of(p);
    GraphLock lock(n.ctx->mu);  // another thread's evaluation may run these
    for (auto& d : n.deps)
      if (d->pending()) ctxs.insert(n.ctx);
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
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (g.defined()) update(i, p, g);
  }
  ++steps_;
}

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params)), o_(o) {
  SY_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0, "SGD",
           "expected non-negative lr, momentum and weight_decay, found lr=", o.lr,
           " momentum=", o.momentum, " weight_decay=", o.weight_decay);
  SY_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD",
           "Nesterov momentum expects momentum > 0 and dampening = 0");
  lr_ = o.lr;
  momentum_.resize(params_.size());
  started_.resize(params_.size(), false);
}

std::vector<Tensor*> SGD::state(size_t i) { return {&momentum_[i]}; }

void SGD::update(size_t i, Tensor& p, const Tensor& g) {
  if (o_.momentum == 0.f) {
    update_inplace({&p}, {g},
                   SgdParams{.n = p.numel(), .lr = lr_, .weight_decay = o_.weight_decay});
    return;
  }
  if (!momentum_[i].defined()) momentum_[i] = zeros(p.shape(), p.device());
  SgdMomentumParams k{.n = p.numel(),
                      .nesterov = o_.nesterov,
                      .first_step = !started_[i],
                      .lr = lr_,
                      .momentum = o_.momentum,
                      .dampening = o_.dampening,
                      .weight_decay = o_.weight_decay};
  update_inplace({&p, &momentum_[i]}, {g}, k);
  started_[i] = true;
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

void Adam::update(size_t i, Tensor& p, const Tensor& g) {
  if (!m_[i].defined()) {
    m_[i] = zeros(p.shape(), p.device());
    v_[i] = zeros(p.shape(), p.device());
    step_[i] = zeros({1}, p.device());
  }
  // step += 1, on the device (no per-step scalar changes)
  Tensor before = step_[i];
  update_inplace({&step_[i]}, {before.detach()}, AffineParams{.n = 1, .scale = 1.f, .shift = 1.f});
  AdamParams k{.n = p.numel(),
               .decoupled = o_.decoupled,
               .lr = lr_,
               .beta1 = o_.beta1,
               .beta2 = o_.beta2,
               .eps = o_.eps,
               .weight_decay = o_.weight_decay};
  update_inplace({&p, &m_[i], &v_[i]}, {g, step_[i].detach()}, k);
}

}  // namespace switchyard::optim
