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
  // Moves parameters and their gradients to `d`, keeping their identity, so
  // an optimizer built before the move still updates them.
  Module& to(Device& d);
  Module& to(std::string_view device_name);
  void zero_grad();
  // Training mode (the default) or evaluation mode, for this module and its
  // submodules: Dropout drops only in training mode, as in PyTorch.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // PyTorch's state_dict: every parameter by its dotted name ("0.weight",
  // "fc1.bias"), in registration order, with PyTorch's layouts (Linear's
  // weight is (out, in)). The tensors are the parameters themselves.
  NamedTensors state_dict() const;
  // Copies values into the parameters, onto each parameter's device, keeping
  // their identity (an optimizer built before still updates them). Strict:
  // any missing or unexpected name is an error, listed all in one message.
  // Not strict: those are returned instead. A wrong shape or dtype is an
  // error either way (dtypes convert as the file reader does: a file's F16
  // weights load into f32 parameters). Nothing is changed when it throws.
  LoadResult load_state_dict(const NamedTensors& state, bool strict = true);
  // From a safetensors file, each tensor read from the mapping straight into
  // its parameter's device memory.
  LoadResult load_state_dict(const SafetensorsFile& file, bool strict = true);

  // The architecture, for model files (nn::save); nullopt when this module
  // type cannot be rebuilt from a file.
  virtual std::optional<ModuleSpec> spec() const { return std::nullopt; }

 protected:
  Tensor& register_parameter(std::string name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> m) {
    children_.emplace_back(std::move(name), m);
    return m;
  }

 private:
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// y = x W^T + b with W (out, in), initialized as PyTorch does:
// U(-1/sqrt(in), 1/sqrt(in)) for both.
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, Device& d = cpu());
  Tensor forward(const Tensor& x) override;
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
// The model in `path`, built from its recorded architecture, with its
// weights read straight onto `d`.
std::shared_ptr<Module> load(const std::string& path, Device& d = cpu());
// Builds modules of `type` for load(): the built-in types are registered;
// register your own module types before loading files that use them.
using ModuleFactory = std::function<std::shared_ptr<Module>(const ModuleSpec&, Device&)>;
void register_module_type(const std::string& type, ModuleFactory make);
std::shared_ptr<Module> build(const ModuleSpec& spec, Device& d = cpu());

}  // namespace switchyard::nn
