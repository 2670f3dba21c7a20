// SPDX-License-Identifier: MIT
// Modules: parameter registration, device moves, Linear and Sequential.
#include "switchyard/nn.h"

#include <cmath>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#include "graph.h"
#include "ops_internal.h"
#include "switchyard/error.h"

namespace switchyard::nn {
using detail::cat;

Tensor& Module::register_parameter(std::string name, Tensor t) {
  SY_CHECK(t.defined(), "register_parameter", "expected a defined tensor for '", name, "'");
  if (!t.requires_grad()) t.requires_grad_();
  params_.emplace_back(std::move(name), std::make_unique<Tensor>(std::move(t)));
  return *params_.back().second;
}

Tensor& Module::register_buffer(std::string name, Tensor t) {
  SY_CHECK(t.defined(), "register_buffer", "expected a defined tensor for '", name, "'");
  buffers_.emplace_back(std::move(name), std::make_unique<Tensor>(std::move(t)));
  return *buffers_.back().second;
}

namespace {
// Drops entries whose tensor came earlier (a module registered twice).
void unique_tensors(std::vector<std::pair<std::string, Tensor>>& v) {
  std::unordered_set<const void*> seen;
  std::erase_if(v, [&](const auto& np) { return !seen.insert(np.second.impl()).second; });
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, b] : buffers_) out.emplace_back(n, *b);
  for (auto& [cn, c] : children_)
    for (auto& [n, b] : c->named_buffers()) out.emplace_back(cn + "." + n, b);
  unique_tensors(out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, p] : params_) out.emplace_back(n, *p);
  for (auto& [cn, c] : children_)
    for (auto& [n, p] : c->named_parameters()) out.emplace_back(cn + "." + n, p);
  unique_tensors(out);  // a module registered twice (shared weights) lists them once
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters()) out.push_back(p);
  return out;
}

Module& Module::to(Device& d) {
  NoGradGuard no_grad;
  // Every copy first, then the swaps: running out of memory on `d` halfway
  // leaves the module whole where it was, never split across two devices.
  struct Move {
    Tensor target, value, grad;
  };
  std::vector<Move> moves;
  for (auto& [n, p] : named_parameters()) {
    if (&p.device() == &d) continue;
    Tensor g = p.grad();
    moves.push_back({p, p.detach().to(d), g.defined() ? g.to(d) : Tensor()});
  }
  for (auto& [n, b] : named_buffers())
    if (&b.device() != &d) moves.push_back({b, b.to(d), Tensor()});
  for (auto& m : moves) {  // `target` shares the impl: the parameter keeps its identity
    m.target.set_data(m.value);
    if (m.grad.defined()) m.target.set_grad(m.grad);
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

// ---- state_dict -------------------------------------------------------------

NamedTensors Module::state_dict() const {
  NamedTensors out;
  for (auto& [n, p] : params_) out.emplace_back(n, *p);
  for (auto& [n, b] : buffers_) out.emplace_back(n, *b);
  for (auto& [cn, c] : children_)
    for (auto& [n, t] : c->state_dict()) out.emplace_back(cn + "." + n, t);
  unique_tensors(out);
  return out;
}

namespace {

// What a state source offers for one name.
struct Offered {
  Shape shape;
  DType dtype;
};

// Checks a source's names, shapes and dtypes against `m`'s parameters, then
// (only when every check passed) sets each parameter to fetch(name, device).
LoadResult load_into(const Module& m, const std::vector<std::pair<std::string, Offered>>& offered,
                     const std::function<Tensor(const std::string&, Device&)>& fetch, bool strict,
                     const std::string& source) {
  const char* op = "load_state_dict";
  auto params = m.state_dict();  // parameters and buffers
  std::unordered_map<std::string, const Offered*> by_name;
  for (auto& [n, o] : offered) by_name.emplace(n, &o);
  LoadResult r;
  std::vector<std::string> wrong;
  std::unordered_set<std::string> known;
  for (auto& [name, p] : params) {
    known.insert(name);
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      r.missing.push_back(name);
      continue;
    }
    const Offered& o = *it->second;
    // A floating dtype loads into another (a bf16 file into f32 parameters,
    // rounded or widened as a cast), as PyTorch's copy_.
    const bool dtype_ok = o.dtype == p.dtype() || (is_floating(o.dtype) && is_floating(p.dtype()));
    if (o.shape != p.shape() || !dtype_ok)
      wrong.push_back(cat("'", name, "': expected shape ", shape_str(p.shape()), " ",
                          dtype_name(p.dtype()), ", found ", shape_str(o.shape), " ",
                          dtype_name(o.dtype)));
  }
  for (auto& [n, o] : offered)
    if (!known.count(n)) r.unexpected.push_back(n);
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
    return s;
  };
  std::string problems;
  if (!wrong.empty()) {
    problems += cat(wrong.size(), " with the wrong shape or dtype: ");
    for (size_t i = 0; i < wrong.size(); ++i) problems += (i ? "; " : "") + wrong[i];
  }
  if (strict && !r.missing.empty())
    problems += cat(problems.empty() ? "" : "; ", r.missing.size(), " missing: ", list(r.missing));
  if (strict && !r.unexpected.empty())
    problems +=
        cat(problems.empty() ? "" : "; ", r.unexpected.size(), " unexpected: ", list(r.unexpected));
  if (!problems.empty())
    throw Error(cat(
        "[", op, "] ", source, " does not match the model's ", params.size(),
        m.named_buffers().empty() ? " parameters (" : " parameters and buffers (", problems, ")",
        strict && wrong.empty() ? "; pass strict=false to load the names that match" : ""));
  // Read everything before changing anything: a failed read leaves the
  // model as it was.
  NoGradGuard no_grad;
  std::vector<std::pair<Tensor, Tensor>> sets;
  for (auto& [name, p] : params)
    if (by_name.count(name)) sets.emplace_back(p, fetch(name, p.device()).to(p.dtype()));
  for (auto& [p, v] : sets) {
    Tensor target = p;  // shares the impl: keeps the parameter's identity
    target.set_data(v);
  }
  return r;
}

}  // namespace

LoadResult Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::vector<std::pair<std::string, Offered>> offered;
  std::unordered_map<std::string, Tensor> values;
  for (auto& [n, t] : state) {
    SY_CHECK(t.defined(), "load_state_dict", "expected a defined tensor for '", n, "'");
    SY_CHECK(values.emplace(n, t).second, "load_state_dict", "expected unique names, found '", n,
             "' twice");
    offered.push_back({n, {t.shape(), t.dtype()}});
  }
  // A fresh copy on the parameter's device: sharing storage with the
  // source would let one model's optimizer write into the other.
  auto fetch = [&](const std::string& name, Device& d) {
    return detail::copy_to(values.at(name), d);
  };
  return load_into(*this, offered, fetch, strict, "the state_dict");
}

LoadResult Module::load_state_dict(const SafetensorsFile& file, bool strict) {
  // Only entries that name a parameter need a dtype Switchyard has: a
  // non-strict load skips the others whatever they hold.
  std::unordered_set<std::string> wanted;
  for (auto& [n, p] : state_dict()) wanted.insert(n);
  std::vector<std::pair<std::string, Offered>> offered;
  for (auto& e : file.entries())
    offered.push_back({e.name, {e.shape, wanted.count(e.name) ? file.dtype_of(e) : DType::f32}});
  auto fetch = [&](const std::string& name, Device& d) { return file.tensor(name, d); };
  return load_into(*this, offered, fetch, strict, cat("'", file.path(), "'"));
}

// ---- layers -----------------------------------------------------------------

Linear::Linear(int64_t in, int64_t out, bool bias, Device& d) {
  SY_CHECK(in > 0 && out > 0, "Linear", "expected positive in/out features, found in=", in,
           " out=", out);
  float bound = 1.f / std::sqrt(float(in));
  weight_ = &register_parameter("weight", uniform({out, in}, -bound, bound, d));
  if (bias) bias_ = &register_parameter("bias", uniform({out}, -bound, bound, d));
}

std::optional<ModuleSpec> Linear::spec() const {
  return ModuleSpec("Linear", {{"in_features", weight_->size(1)},
                               {"out_features", weight_->size(0)},
                               {"bias", bias_ ? 1 : 0}});
}

Tensor Linear::forward(const Tensor& x) {
  SY_CHECK(x.dim() >= 1 && x.size(-1) == weight_->size(1), "Linear", "expected input of shape (*, ",
           weight_->size(1), "), found ", shape_str(x.shape()));
  return linear(x, *weight_, bias_ ? *bias_ : none_);
}

Tensor Linear::forward_relu(const Tensor& x) {
  SY_CHECK(x.dim() >= 1 && x.size(-1) == weight_->size(1), "Linear", "expected input of shape (*, ",
           weight_->size(1), "), found ", shape_str(x.shape()));
  return detail::linear_act(x, *weight_, bias_ ? *bias_ : none_, true);
}

Dropout::Dropout(float p) : p_(p) {
  SY_CHECK(p >= 0.f && p <= 1.f, "Dropout", "expected a probability p in [0, 1], found ", p);
}

Embedding::Embedding(int64_t num, int64_t dim, Device& d) : num_(num), dim_(dim) {
  SY_CHECK(num > 0 && dim > 0, "Embedding", "expected positive sizes, found ", num, " and ", dim);
  weight_ = &register_parameter("weight", randn({num, dim}, Options().device(d)));
}

std::optional<ModuleSpec> Embedding::spec() const {
  return ModuleSpec("Embedding", {{"num_embeddings", num_}, {"embedding_dim", dim_}});
}

LayerNorm::LayerNorm(int64_t n, float eps, bool affine, Device& d) : n_(n), eps_(eps) {
  SY_CHECK(n > 0 && eps > 0.f, "LayerNorm", "expected a positive size and eps, found ", n, " and ",
           eps);
  if (affine) {
    weight_ = &register_parameter("weight", ones({n}, d));
    bias_ = &register_parameter("bias", zeros({n}, d));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  SY_CHECK(x.dim() >= 1 && x.size(-1) == n_, "LayerNorm", "expected a last dimension of ", n_,
           ", found shape ", shape_str(x.shape()));
  return layer_norm(x, weight_ ? *weight_ : Tensor(), bias_ ? *bias_ : Tensor(), eps_);
}

std::optional<ModuleSpec> LayerNorm::spec() const {
  return ModuleSpec("LayerNorm",
                    {{"normalized_shape", n_}, {"elementwise_affine", weight_ ? 1 : 0}}, {},
                    {{"eps", double(eps_)}});
}

Conv2d::Conv2d(int64_t in, int64_t out, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation,
               int64_t groups, bool bias, Device& d)
    : stride_(stride), padding_(padding), dilation_(dilation), groups_(groups) {
  SY_CHECK(in > 0 && out > 0 && kernel.h > 0 && kernel.w > 0, "Conv2d",
           "expected positive channels and kernel size, found in=", in, " out=", out, " kernel=(",
           kernel.h, ", ", kernel.w, ")");
  SY_CHECK(groups >= 1 && in % groups == 0 && out % groups == 0, "Conv2d",
           "expected groups >= 1 dividing in (", in, ") and out (", out, "), found ", groups);
  const float bound = 1.f / std::sqrt(float(in / groups * kernel.h * kernel.w));
  weight_ = &register_parameter("weight",
                                uniform({out, in / groups, kernel.h, kernel.w}, -bound, bound, d));
  if (bias) bias_ = &register_parameter("bias", uniform({out}, -bound, bound, d));
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, *weight_, bias_ ? *bias_ : Tensor(), stride_, padding_, dilation_, groups_);
}

std::optional<ModuleSpec> Conv2d::spec() const {
  const Shape& w = weight_->shape();
  return ModuleSpec("Conv2d", {{"in_channels", w[1] * groups_},
                               {"out_channels", w[0]},
                               {"kernel_h", w[2]},
                               {"kernel_w", w[3]},
                               {"stride_h", stride_.h},
                               {"stride_w", stride_.w},
                               {"padding_h", padding_.h},
                               {"padding_w", padding_.w},
                               {"dilation_h", dilation_.h},
                               {"dilation_w", dilation_.w},
                               {"groups", groups_},
                               {"bias", bias_ ? 1 : 0}});
}

namespace {

// A pooling module's stride: the kernel size when not given (PyTorch's
// default), after checking the kernel.
Size2 pool_stride(const char* module, Size2 kernel, Size2 stride) {
  SY_CHECK(kernel.h > 0 && kernel.w > 0, module, "expected a positive kernel size, found (",
           kernel.h, ", ", kernel.w, ")");
  return stride.h == 0 && stride.w == 0 ? kernel : stride;
}

std::map<std::string, int64_t> window_args(Size2 kernel, Size2 stride, Size2 padding) {
  return {{"kernel_h", kernel.h}, {"kernel_w", kernel.w},   {"stride_h", stride.h},
          {"stride_w", stride.w}, {"padding_h", padding.h}, {"padding_w", padding.w}};
}

}  // namespace

MaxPool2d::MaxPool2d(Size2 kernel, Size2 stride, Size2 padding)
    : kernel_(kernel), stride_(pool_stride("MaxPool2d", kernel, stride)), padding_(padding) {}

std::optional<ModuleSpec> MaxPool2d::spec() const {
  return ModuleSpec("MaxPool2d", window_args(kernel_, stride_, padding_));
}

AvgPool2d::AvgPool2d(Size2 kernel, Size2 stride, Size2 padding, bool count_include_pad)
    : kernel_(kernel),
      stride_(pool_stride("AvgPool2d", kernel, stride)),
      padding_(padding),
      include_pad_(count_include_pad) {}

std::optional<ModuleSpec> AvgPool2d::spec() const {
  auto args = window_args(kernel_, stride_, padding_);
  args["count_include_pad"] = include_pad_ ? 1 : 0;
  return ModuleSpec("AvgPool2d", std::move(args));
}

BatchNorm::BatchNorm(int dims, int64_t n, float eps, float momentum, bool affine, Device& d)
    : dims_(dims), n_(n), eps_(eps), momentum_(momentum) {
  const char* op = dims == 1 ? "BatchNorm1d" : "BatchNorm2d";
  SY_CHECK(n > 0 && eps > 0.f, op, "expected a positive size and eps, found ", n, " and ", eps);
  SY_CHECK(momentum >= 0.f && momentum <= 1.f, op, "expected momentum in [0, 1], found ", momentum);
  if (affine) {
    weight_ = &register_parameter("weight", ones({n}, d));
    bias_ = &register_parameter("bias", zeros({n}, d));
  }
  mean_ = &register_buffer("running_mean", zeros({n}, d));
  var_ = &register_buffer("running_var", ones({n}, d));
  count_ =
      &register_buffer("num_batches_tracked", zeros({}, Options().dtype(DType::i64).device(d)));
}

Tensor BatchNorm::forward(const Tensor& x) { return run(x, false); }
Tensor BatchNorm::forward_relu(const Tensor& x) { return run(x, true); }
Tensor BatchNorm::forward_relu_pool(const Tensor& x, bool relu, int64_t pool) {
  SY_CHECK(pool >= 1, "BatchNorm", "expected a pooling window of at least 1, found ", pool);
  return run(x, relu, pool);
}

Tensor BatchNorm::run(const Tensor& x, bool relu, int64_t pool) {
  const char* op = dims_ == 1 ? "BatchNorm1d" : "BatchNorm2d";
  const bool ok = dims_ == 1 ? (x.dim() == 2 || x.dim() == 3) : x.dim() == 4;
  SY_CHECK(ok && x.size(1) == n_, op, "expected input of shape ",
           dims_ == 1 ? cat("(N, ", n_, ") or (N, ", n_, ", L)") : cat("(N, ", n_, ", H, W)"),
           ", found ", shape_str(x.shape()));
  // Training: num_batches_tracked += 1, in the launch that blends the
  // running statistics.
  return detail::batch_norm_fused(x, *mean_, *var_, weight_ ? *weight_ : Tensor(),
                                  bias_ ? *bias_ : Tensor(), is_training(), momentum_, eps_,
                                  is_training() ? count_ : nullptr, relu, pool);
}

std::optional<ModuleSpec> BatchNorm::spec() const {
  return ModuleSpec(dims_ == 1 ? "BatchNorm1d" : "BatchNorm2d",
                    {{"num_features", n_}, {"affine", weight_ ? 1 : 0}}, {},
                    {{"eps", double(eps_)}, {"momentum", double(momentum_)}});
}

Unflatten::Unflatten(std::vector<int64_t> sizes) : sizes_(std::move(sizes)) {
  SY_CHECK(!sizes_.empty(), "Unflatten", "expected at least one size, found none");
  for (int64_t v : sizes_) SY_CHECK(v >= 1, "Unflatten", "expected positive sizes, found ", v);
}

Tensor Unflatten::forward(const Tensor& x) {
  int64_t n = 1;
  for (int64_t v : sizes_) n *= v;
  SY_CHECK(x.dim() == 2 && x.size(1) == n, "Unflatten", "expected input of shape (N, ", n,
           "), found ", shape_str(x.shape()));
  Shape s{x.size(0)};
  s.insert(s.end(), sizes_.begin(), sizes_.end());
  return x.reshape(s);
}

std::optional<ModuleSpec> Unflatten::spec() const {
  std::map<std::string, int64_t> a{{"dims", int64_t(sizes_.size())}};
  for (size_t i = 0; i < sizes_.size(); ++i) a["size" + std::to_string(i)] = sizes_[i];
  return ModuleSpec("Unflatten", a);
}

Sequential& Sequential::add(std::shared_ptr<Module> m) {
  SY_CHECK(m != nullptr, "Sequential", "expected a module, found null");
  layers_.push_back(register_module(std::to_string(layers_.size()), std::move(m)));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Module& cur = *layers_[i];
    const Module* next = i + 1 < layers_.size() ? layers_[i + 1].get() : nullptr;
    // Exactly our BatchNorm and ReLU (a user's subclass may override forward).
    const std::type_info& t = typeid(cur);
    const bool bn = t == typeid(BatchNorm) || t == typeid(BatchNorm1d) || t == typeid(BatchNorm2d);
    // Then exactly a ReLU and/or exactly a MaxPool2d of square windows as
    // wide as their stride, on (N, C, H, W) input: one fused run.
    const bool relu = bn && next && typeid(*next) == typeid(ReLU);
    const size_t at = i + (relu ? 2 : 1);
    const Module* pool = bn && at < layers_.size() ? layers_[at].get() : nullptr;
    const int64_t window = pool && typeid(*pool) == typeid(MaxPool2d) && h.dim() == 4
                               ? static_cast<const MaxPool2d&>(*pool).square_window()
                               : 0;
    if (window > 0) {
      h = static_cast<BatchNorm&>(cur).forward_relu_pool(h, relu, window);
      i = at;
    } else if (relu) {
      h = static_cast<BatchNorm&>(cur).forward_relu(h);
      ++i;
    } else if (t == typeid(Linear) && next && typeid(*next) == typeid(ReLU)) {
      h = static_cast<Linear&>(cur).forward_relu(h);
      ++i;
    } else {
      h = layers_[i]->forward(h);
    }
  }
  return h;
}

}  // namespace switchyard::nn
