// Modules: parameter registration, device moves, Linear and Sequential.
#include "switchyard/nn.h"

#include <cmath>
#include <unordered_set>

#include "switchyard/error.h"

namespace switchyard::nn {

Tensor& Module::register_parameter(std::string name, Tensor t) {
  SY_CHECK(t.defined(), "register_parameter", "expected a defined tensor for '", name, "'");
  if (!t.requires_grad()) t.requires_grad_();
  params_.emplace_back(std::move(name), std::make_unique<Tensor>(std::move(t)));
  return *params_.back().second;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, p] : params_) out.emplace_back(n, *p);
  for (auto& [cn, c] : children_)
    for (auto& [n, p] : c->named_parameters()) out.emplace_back(cn + "." + n, p);
  // A module registered twice (shared weights) lists its parameters once.
  std::unordered_set<const void*> seen;
  std::erase_if(out, [&](const auto& np) { return !seen.insert(np.second.impl()).second; });
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters()) out.push_back(p);
  return out;
}

Module& Module::to(Device& d) {
  NoGradGuard no_grad;
  for (auto& [n, p] : named_parameters()) {
    if (&p.device() == &d) continue;
    Tensor moved = p.detach().to(d);
    Tensor g = p.grad();
    Tensor copy = p;  // shares the impl: the move keeps the parameter's identity
    copy.set_data(moved);
    if (g.defined()) copy.set_grad(g.to(d));
  }
  return *this;
}

Module& Module::to(std::string_view name) { return to(device(name)); }

void Module::zero_grad() {
  for (auto& p : parameters()) p.zero_grad();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

Linear::Linear(int64_t in, int64_t out, bool bias, Device& d) {
  SY_CHECK(in > 0 && out > 0, "Linear", "expected positive in/out features, found in=", in,
           " out=", out);
  float bound = 1.f / std::sqrt(float(in));
  weight_ = &register_parameter("weight", uniform({out, in}, -bound, bound, d));
  if (bias) bias_ = &register_parameter("bias", uniform({out}, -bound, bound, d));
}

Tensor Linear::forward(const Tensor& x) {
  SY_CHECK(x.dim() == 2 && x.size(1) == weight_->size(1), "Linear",
           "expected input of shape (batch, ", weight_->size(1), "), found ", shape_str(x.shape()));
  return linear(x, *weight_, bias_ ? *bias_ : none_);
}

Sequential& Sequential::add(std::shared_ptr<Module> m) {
  SY_CHECK(m != nullptr, "Sequential", "expected a module, found null");
  layers_.push_back(register_module(std::to_string(layers_.size()), std::move(m)));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& l : layers_) h = l->forward(h);
  return h;
}

}  // namespace switchyard::nn
