// Modules: parameters, submodules and moving them between devices.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "switchyard/ops.h"

namespace switchyard::nn {

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
  void train(bool on = true);
  bool is_training() const { return training_; }

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
};
class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return gelu(x); }
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
};
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};
// Flattens every dimension after the first.
class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.flatten(1); }
};

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential& add(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  Module& operator[](size_t i) { return *layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace switchyard::nn
