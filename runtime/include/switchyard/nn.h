// SPDX-License-Identifier: MIT
// Modules: parameters, submodules and moving them between devices.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "switchyard/ops.h"
#include "switchyard/serialize.h"

namespace switchyard::nn {

// What a model file records of a module so that nn::load can rebuild it: a
// type name registered with register_module_type, integer settings, and the
// specs of its children in order (a Sequential's layers).
struct ModuleSpec {
  ModuleSpec(std::string t = "", std::map<std::string, int64_t> a = {},
             std::vector<ModuleSpec> c = {}, std::map<std::string, double> r = {})
      : type(std::move(t)), args(std::move(a)), children(std::move(c)), reals(std::move(r)) {}
  std::string type;
  std::map<std::string, int64_t> args;
  std::vector<ModuleSpec> children;
  std::map<std::string, double> reals;  // real-valued settings (dropout's p, eps)
  // A setting for a factory to read: present and in [lo, hi], else an error
  // naming the module type (what nn::load reports for a bad file).
  int64_t arg(const std::string& name, int64_t lo, int64_t hi) const;
  double real(const std::string& name, double lo, double hi) const;
};

// Returned by Module::load_state_dict: what strict mode would have refused.
struct LoadResult {
  std::vector<std::string> missing;     // parameters the state_dict lacks
  std::vector<std::string> unexpected;  // entries no parameter has
};

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  // Parameters of this module and its submodules, in registration order.
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  // Moves parameters, their gradients and buffers to `d`, keeping their
  // identity, so an optimizer built before the move still updates them.
  // All or nothing: every copy is made before any tensor is switched over,
  // so a failure (out of memory on `d`) leaves the module where it was.
  Module& to(Device& d);
  Module& to(std::string_view device_name);
  void zero_grad();
  // Training mode (the default) or evaluation mode, for this module and its
  // submodules: Dropout drops only in training mode, as in PyTorch.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Buffers: state that is not trained but saved and moved with the module
  // (BatchNorm's running statistics), by dotted name as parameters.
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;

  // PyTorch's state_dict: every parameter and buffer by its dotted name
  // ("0.weight", "fc1.bias", "1.running_mean"), each module's parameters,
  // then its buffers, then its children's, as PyTorch orders them, with
  // PyTorch's layouts (Linear's weight is (out, in)). The tensors are the
  // parameters and buffers themselves.
  NamedTensors state_dict() const;
  // Copies values into the parameters, onto each parameter's device, keeping
  // their identity (an optimizer built before still updates them). Strict:
  // any missing or unexpected name is an error, listed all in one message.
  // Not strict: those are returned instead. A wrong shape or dtype is an
  // error either way (floating dtypes convert, as PyTorch's copy_: a file's
  // bf16 or f16 weights load into f32 parameters, widened exactly; an
  // integer tensor must match). Nothing is changed when it throws.
  LoadResult load_state_dict(const NamedTensors& state, bool strict = true);
  // From a safetensors file, each tensor read from the mapping straight into
  // its parameter's device memory.
  LoadResult load_state_dict(const SafetensorsFile& file, bool strict = true);

  // The architecture, for model files (nn::save); nullopt when this module
  // type cannot be rebuilt from a file.
  virtual std::optional<ModuleSpec> spec() const { return std::nullopt; }

 protected:
  Tensor& register_parameter(std::string name, Tensor t);
  Tensor& register_buffer(std::string name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> m) {
    children_.emplace_back(std::move(name), m);
    return m;
  }

 private:
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// y = x W^T + b with W (out, in) over the last dimension of x (*, in), initialized as PyTorch does:
// U(-1/sqrt(in), 1/sqrt(in)) for both.
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, Device& d = cpu());
  Tensor forward(const Tensor& x) override;
  // forward(x) then a ReLU, the ReLU in the product's epilogue.
  Tensor forward_relu(const Tensor& x);
  std::optional<ModuleSpec> spec() const override;
  Tensor& weight() { return *weight_; }
  Tensor& bias() { return *bias_; }

 private:
  Tensor* weight_;
  Tensor* bias_ = nullptr;
  Tensor none_;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
  std::optional<ModuleSpec> spec() const override { return ModuleSpec("ReLU"); }
};
class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return gelu(x); }
  std::optional<ModuleSpec> spec() const override { return ModuleSpec("GELU"); }
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
  std::optional<ModuleSpec> spec() const override { return ModuleSpec("Tanh"); }
};
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
  std::optional<ModuleSpec> spec() const override { return ModuleSpec("Sigmoid"); }
};
// Flattens every dimension after the first.
class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.flatten(1); }
  std::optional<ModuleSpec> spec() const override { return ModuleSpec("Flatten"); }
};

// dropout(x, p) in training mode, x in evaluation mode.
class Dropout : public Module {
 public:
  explicit Dropout(float p = 0.5f);
  Tensor forward(const Tensor& x) override { return dropout(x, p_, is_training()); }
  std::optional<ModuleSpec> spec() const override {
    return ModuleSpec("Dropout", {}, {}, {{"p", double(p_)}});
  }

 private:
  float p_;
};

// A table of `num` learned vectors of `dim`, N(0, 1) as PyTorch's, looked up
// by integer indices: (*) -> (*, dim).
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, Device& d = cpu());
  Tensor forward(const Tensor& indices) override { return embedding(indices, *weight_); }
  std::optional<ModuleSpec> spec() const override;
  Tensor& weight() { return *weight_; }

 private:
  int64_t num_, dim_;
  Tensor* weight_;
};

// layer_norm over the last dimension, of size `n`, with a learned weight
// (ones) and bias (zeros) when `affine`, named as PyTorch names them.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t n, float eps = 1e-5f, bool affine = true, Device& d = cpu());
  Tensor forward(const Tensor& x) override;
  std::optional<ModuleSpec> spec() const override;

 private:
  int64_t n_;
  float eps_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
};

// conv2d with a weight (out, in/groups, kH, kW) and bias (out), initialized
// as PyTorch does: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups*kH*kW.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in, int64_t out, Size2 kernel, Size2 stride = 1, Size2 padding = 0,
         Size2 dilation = 1, int64_t groups = 1, bool bias = true, Device& d = cpu());
  Tensor forward(const Tensor& x) override;
  std::optional<ModuleSpec> spec() const override;
  Tensor& weight() { return *weight_; }

 private:
  Size2 stride_, padding_, dilation_;
  int64_t groups_;
  Tensor* weight_;
  Tensor* bias_ = nullptr;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel, Size2 stride = 0, Size2 padding = 0);
  Tensor forward(const Tensor& x) override { return max_pool2d(x, kernel_, stride_, padding_); }
  std::optional<ModuleSpec> spec() const override;
  // k for square k x k windows with stride k and no padding (the form a
  // batch norm before it fuses into), else 0.
  int64_t square_window() const {
    return kernel_.h == kernel_.w && stride_.h == kernel_.h && stride_.w == kernel_.w &&
                   padding_.h == 0 && padding_.w == 0
               ? kernel_.h
               : 0;
  }

 private:
  Size2 kernel_, stride_, padding_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel, Size2 stride = 0, Size2 padding = 0,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& x) override {
    return avg_pool2d(x, kernel_, stride_, padding_, include_pad_);
  }
  std::optional<ModuleSpec> spec() const override;

 private:
  Size2 kernel_, stride_, padding_;
  bool include_pad_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output = 1) : out_(output) {}
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, out_); }
  std::optional<ModuleSpec> spec() const override {
    return ModuleSpec("AdaptiveAvgPool2d", {{"output_h", out_.h}, {"output_w", out_.w}});
  }

 private:
  Size2 out_;
};

// batch_norm over channel dimension 1 with a learned weight (ones) and bias
// (zeros) when `affine`, and the buffers running_mean (zeros), running_var
// (ones) and num_batches_tracked (i64), named as PyTorch names them.
// Training mode normalizes by the batch and updates the running statistics;
// evaluation mode normalizes by them. BatchNorm1d takes (N, C) or (N, C, L),
// BatchNorm2d (N, C, H, W).
class BatchNorm : public Module {
 public:
  BatchNorm(int dims, int64_t num_features, float eps = 1e-5f, float momentum = 0.1f,
            bool affine = true, Device& d = cpu());
  Tensor forward(const Tensor& x) override;
  // relu(forward(x)) with the ReLU fused into batch norm's kernels (both
  // ways): what Sequential runs for a BatchNorm followed by a ReLU.
  Tensor forward_relu(const Tensor& x);
  // This batch norm, a ReLU when `relu`, then max pooling of pool x pool
  // windows with stride pool (MaxPool2d::square_window), as one: the
  // pooling reads the normalized values without their full-size tensor
  // being written, and the backward reads the pooling's gradient in place.
  Tensor forward_relu_pool(const Tensor& x, bool relu, int64_t pool);
  std::optional<ModuleSpec> spec() const override;
  Tensor& running_mean() { return *mean_; }
  Tensor& running_var() { return *var_; }

 private:
  int dims_;
  int64_t n_;
  Tensor run(const Tensor& x, bool relu, int64_t pool = 0);
  float eps_, momentum_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor *mean_, *var_, *count_;
};
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t n, float eps = 1e-5f, float momentum = 0.1f, bool affine = true,
                       Device& d = cpu())
      : BatchNorm(1, n, eps, momentum, affine, d) {}
};
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t n, float eps = 1e-5f, float momentum = 0.1f, bool affine = true,
                       Device& d = cpu())
      : BatchNorm(2, n, eps, momentum, affine, d) {}
};

// Reshapes dimension 1 into `sizes`: (N, C*H*W) -> (N, C, H, W) for {C, H, W}.
class Unflatten : public Module {
 public:
  explicit Unflatten(std::vector<int64_t> sizes);
  Tensor forward(const Tensor& x) override;
  std::optional<ModuleSpec> spec() const override;

 private:
  std::vector<int64_t> sizes_;
};

// Runs its layers in order. A BatchNorm followed by a ReLU runs as one
// (BatchNorm::forward_relu), and with a MaxPool2d of k x k windows, stride
// k, after them (or right after the BatchNorm) as one with the pooling
// (BatchNorm::forward_relu_pool): the same values and gradients, fewer
// launches and bytes. A Linear followed by a ReLU runs as one too
// (Linear::forward_relu).
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential& add(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  Module& operator[](size_t i) { return *layers_.at(i); }
  std::optional<ModuleSpec> spec() const override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

// Model files: a safetensors file holding the state_dict, with the
// architecture (the modules' specs, as JSON) in its metadata under
// "switchyard.model", so that load() needs the file alone. `metadata` adds
// entries of the caller's. Throws when a module has no spec().
void save(const Module& m, const std::string& path, const Metadata& metadata = {});
// The same, with the floating-point tensors (parameters and float buffers)
// stored in `dtype` (bf16 or f16 halve the file; rounded to nearest even);
// integer buffers are kept. load() reads such a file into the module's own
// dtypes.
void save(const Module& m, const std::string& path, DType dtype, const Metadata& metadata = {});
// The model in `path`, built from its recorded architecture, with its
// weights read straight onto `d`.
std::shared_ptr<Module> load(const std::string& path, Device& d = cpu());
// Builds modules of `type` for load(): the built-in types are registered;
// register your own module types before loading files that use them.
using ModuleFactory = std::function<std::shared_ptr<Module>(const ModuleSpec&, Device&)>;
void register_module_type(const std::string& type, ModuleFactory make);
std::shared_ptr<Module> build(const ModuleSpec& spec, Device& d = cpu());

}  // namespace switchyard::nn
