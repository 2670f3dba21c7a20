// SPDX-License-Identifier: MIT
// The autograd engine: walks GradFns from a root in reverse topological order,
// calling each op's backward (written with ops, so it runs on every backend).
#include <unordered_map>
#include <unordered_set>

#include "graph.h"
#include "ops_internal.h"
#include "switchyard/error.h"
#include "switchyard/ops.h"

namespace switchyard {
using namespace detail;

Tensor& Tensor::requires_grad_(bool r) {
  SY_CHECK(defined(), "requires_grad_", "expected a defined tensor");
  SY_CHECK(!r || is_floating(dtype()), "requires_grad_",
           "only floating-point tensors (f32, bf16, f16) can require gradients, found dtype ",
           dtype_name(dtype()));
  SY_CHECK(impl_->grad_fn == nullptr || r, "requires_grad_",
           "cannot turn off requires_grad on a non-leaf tensor; use detach()");
  impl_->requires_grad = r;
  return *this;
}

bool Tensor::requires_grad() const { return defined() && impl_->requires_grad; }
bool Tensor::is_leaf() const { return defined() && impl_->grad_fn == nullptr; }

Tensor Tensor::grad() const {
  if (!defined()) return Tensor();
  std::lock_guard<std::mutex> g(impl_->grad_mu);
  return impl_->grad ? Tensor(impl_->grad) : Tensor();
}

void Tensor::set_grad(const Tensor& g) {
  SY_CHECK(defined(), "set_grad", "expected a defined tensor");
  if (g.defined())
    SY_CHECK(g.shape() == shape(), "set_grad", "expected a gradient of shape ", shape_str(shape()),
             ", found ", shape_str(g.shape()));
  std::lock_guard<std::mutex> lock(impl_->grad_mu);
  impl_->grad = g.defined() ? g.impl_ptr() : nullptr;
}

void Tensor::zero_grad() {
  if (!defined()) return;
  std::shared_ptr<TensorImpl> old;  // freed outside the lock
  std::lock_guard<std::mutex> lock(impl_->grad_mu);
  old.swap(impl_->grad);
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  SY_CHECK(defined(), "backward", "expected a defined tensor");
  SY_CHECK(requires_grad(), "backward",
           "the tensor does not require grad and has no grad_fn (was it created under "
           "NoGradGuard, or from inputs that do not require grad?)");
  // Each op's backward runs in the dtypes its forward chose, not autocast's.
  detail::AutocastOff autocast_off;
  Tensor seed = grad.defined() ? grad.detach() : grad;
  if (!seed.defined()) {
    SY_CHECK(numel() == 1, "backward",
             "grad can be implicitly created only for scalar outputs; expected 1 element, found "
             "shape ",
             shape_str(shape()), ". Pass a gradient of that shape.");
    seed = ones(shape(), device());
  } else {
    SY_CHECK(seed.shape() == shape(), "backward", "expected a gradient of shape ",
             shape_str(shape()), ", found ", shape_str(seed.shape()));
    SY_CHECK(&seed.device() == &device(), "backward", "expected the gradient on ", device().str(),
             ", found it on ", seed.device().str());
  }
  NoGradGuard no_grad;

  // Topological order of the impls reachable through grad_fn inputs.
  std::vector<TensorImpl*> order;
  std::unordered_set<TensorImpl*> seen;
  std::vector<std::pair<TensorImpl*, size_t>> stack{{impl(), 0}};
  seen.insert(impl());
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    auto* fn = t->grad_fn.get();
    if (fn && next < fn->inputs.size()) {
      TensorImpl* in = fn->inputs[next++].get();
      if (in && !seen.count(in)) {
        seen.insert(in);
        stack.push_back({in, 0});
      }
    } else {
      order.push_back(t);
      stack.pop_back();
    }
  }

  std::unordered_map<TensorImpl*, Tensor> grads;
  grads[impl()] = seed;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* t = *it;
    auto g = grads.find(t);
    if (g == grads.end()) continue;
    Tensor gt = g->second;
    grads.erase(g);
    if (!t->grad_fn) {
      if (t->requires_grad) {
        // A fresh impl: the gradient never aliases another tensor's handle.
        // Under grad_mu: threads sharing a parameter add to its gradient.
        std::lock_guard<std::mutex> g(t->grad_mu);
        t->grad = (t->grad ? add(Tensor(t->grad), gt) : gt.detach()).impl_ptr();
        queue_value(t->grad->node());
      }
      continue;
    }
    GradFn& fn = *t->grad_fn;
    std::vector<Tensor> gin = fn.backward(gt);
    SY_CHECK(gin.size() == fn.inputs.size(), "backward", fn.name, " returned ", gin.size(),
             " gradients, expected ", fn.inputs.size(), " (internal error)");
    for (size_t i = 0; i < gin.size(); ++i) {
      TensorImpl* in = fn.inputs[i].get();
      if (!in || !gin[i].defined()) continue;
      auto [slot, fresh] = grads.try_emplace(in, gin[i]);
      if (!fresh) slot->second = add(slot->second, gin[i]);
    }
  }
  if (!retain_graph) {
    // Free saved values; a second backward through this graph is an error.
    static const auto freed = [] {
      auto fn = std::make_shared<GradFn>();
      fn->name = "freed";
      fn->backward = [](const Tensor&) -> std::vector<Tensor> {
        throw Error(
            "[backward] trying to backward through the graph a second time; expected "
            "retain_graph=true on the first backward()");
      };
      return fn;
    }();
    for (TensorImpl* t : order)
      if (t->grad_fn) t->grad_fn = freed;
  }
}

}  // namespace switchyard
