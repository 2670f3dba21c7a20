// SPDX-License-Identifier: MIT
// Tensor: a lazily evaluated, device-placed n-d array with autograd.
// Ops only build graph nodes; values are computed when needed on the host
// (item(), to_vector(), moving off the device) or on synchronize().
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string_view>
#include <vector>

#include "switchyard/device.h"
#include "switchyard/dtype.h"

namespace switchyard {

namespace detail {
struct TensorImpl;
struct Node;
}  // namespace detail

// Where and how to create a tensor: Options(dev), Options(DType::i32),
// Options().device(dev).requires_grad().
class Options;
using TensorOptions = Options;  // libtorch's name

class Options {
 public:
  Options() = default;
  Options(Device& d) : device_(&d) {}                // NOLINT: implicit on purpose
  Options(DType t) : dtype_(t), dtype_set_(true) {}  // NOLINT
  Options& device(Device& d) {
    device_ = &d;
    return *this;
  }
  Options& dtype(DType t) {
    dtype_ = t;
    dtype_set_ = true;
    return *this;
  }
  Options& requires_grad(bool r = true) {
    requires_grad_ = r;
    return *this;
  }
  Device& device() const;                 // cpu() when unset, as in PyTorch
  DType dtype() const { return dtype_; }  // f32 unless set
  bool has_dtype() const { return dtype_set_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  Device* device_ = nullptr;
  DType dtype_ = DType::f32;
  bool dtype_set_ = false;
  bool requires_grad_ = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t dim() const { return int64_t(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return switchyard::numel(shape()); }
  DType dtype() const;
  Device& device() const;

  // Moving between devices and types. Same device: returns *this.
  // to() returns once the source has been consumed (copied, or staged for an
  // upload the device runs before any later work on it), so the source can
  // be freed at once and there is nothing to wait for. non_blocking is
  // accepted for PyTorch parity; every copy already behaves that way.
  Tensor to(Device& d, bool non_blocking = false) const;
  Tensor to(std::string_view device_name, bool non_blocking = false) const;
  Tensor to(DType t) const;
  // A copy in pinned host memory (lent by the first GPU device that has
  // it), from which .to(that device) is a device-side copy: no staging, no
  // host wait, so the upload overlaps with queued work. A CPU tensor only;
  // returns *this when no device offers pinned memory. As in PyTorch.
  Tensor pin_memory() const;
  // Pinned host memory lent by `device` itself (so .to(device) is a device copy).
  Tensor pin_memory(Device& device) const;
  bool is_pinned() const;

  // Reading values back (evaluates pending work).
  float item() const;
  template <class T>
  // T matching dtype: float (f32, and bf16/f16 widened exactly), int32_t,
  // uint8_t, int64_t; uint16_t gives a bf16/f16 tensor's stored words.
  std::vector<T> to_vector() const;

  // Views share storage; transpose and contiguous copies do not.
  Tensor reshape(Shape s) const;  // one dim may be -1
  Tensor view(Shape s) const { return reshape(std::move(s)); }
  Tensor flatten(int64_t start_dim = 1) const;
  Tensor slice(int64_t begin, int64_t end) const;  // rows [begin, end)
  Tensor t() const;                                // 2-D transpose

  // The ops as methods, as in libtorch (x.sum(1), x.relu(), x.matmul(w));
  // the free functions in ops.h are the same ops.
  Tensor sum() const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor relu() const;
  Tensor gelu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor square() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor softmax(int64_t dim = -1) const;
  Tensor log_softmax(int64_t dim = -1) const;
  Tensor argmax(int64_t dim = -1) const;
  // Comparisons give u8 tensors (1 where true), as PyTorch's give bool.
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(float s) const;
  Tensor ne(float s) const;
  Tensor lt(float s) const;
  Tensor le(float s) const;
  Tensor gt(float s) const;
  Tensor ge(float s) const;

  // Autograd.
  Tensor& requires_grad_(bool r = true);
  bool requires_grad() const;
  bool is_leaf() const;
  Tensor grad() const;  // undefined until a backward() reaches it
  void set_grad(const Tensor& g);
  void zero_grad();  // drops the gradient (set_to_none, as PyTorch's default)
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;

  // Replace this tensor's value, keeping its identity (used by Module::to).
  void set_data(const Tensor& value);

  detail::TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<detail::TensorImpl>& impl_ptr() const { return impl_; }

 private:
  Tensor pin_with(Device* only) const;
  std::shared_ptr<detail::TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Factories.
Tensor zeros(Shape s, Options o = {});
Tensor ones(Shape s, Options o = {});
Tensor full(Shape s, float value, Options o = {});
Tensor rand(Shape s, Options o = {});   // uniform [0, 1)
Tensor randn(Shape s, Options o = {});  // standard normal
Tensor uniform(Shape s, float lo, float hi, Options o = {});
Tensor arange(int64_t n, Options o = {});
// Integers uniform in [low, high), counter-based like rand; i32 unless
// the options name another dtype. high - low must be in [1, 2^24].
Tensor randint(int64_t low, int64_t high, Shape s, Options o = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor from_vector(const std::vector<float>& v, Shape s, Options o = {});
Tensor from_vector(const std::vector<int32_t>& v, Shape s, Options o = {});
Tensor from_vector(const std::vector<uint8_t>& v, Shape s, Options o = {});
Tensor from_vector(const std::vector<int64_t>& v, Shape s, Options o = {});
Tensor from_data(const void* data, DType t, Shape s, Options o = {});

// Seed of the global generator; rand/randn are counter-based (Philox), so a
// seed gives the same numbers on every backend and every run.
void manual_seed(uint64_t seed);
// The global generator's whole state: the seed and the next stream. Saved
// in checkpoints, so a resumed run draws what an uninterrupted one would.
struct RandomState {
  uint64_t seed = 0, offset = 0;
};
RandomState random_state();
void set_random_state(const RandomState& s);

// Run everything pending on the device and wait for it.
void synchronize(Device& d);

// Evaluate tensors now, in one submission per device.
void eval(const std::vector<Tensor>& ts);

// Autograd mode.
bool is_grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace switchyard
