// SPDX-License-Identifier: MIT
// Internal: what every op file shares (ops.cpp, ops_nn.cpp): input checks,
// graph nodes and the autograd record.
#pragma once
#include <functional>
#include <initializer_list>
#include <optional>
#include <vector>

#include "switchyard/backend/kernels.h"
#include "switchyard/tensor.h"

namespace switchyard::detail {

void check_defined(const char* op, const Tensor& t);
void check_f32(const char* op, const Tensor& t);
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
// bf16/f16 inputs of an op whose kernels read f32: the op runs on its inputs
// widened to f32 (exact) and its floating result is rounded back to their
// dtype when every floating input has it (PyTorch's promotion: bf16 with f32
// or f16 gives f32). Casts are differentiable, so the backward runs too.
// half_inputs is empty when no input is bf16/f16 (undefined ones are
// skipped); narrow leaves integer results and a dtype of f32 alone.
std::optional<DType> half_inputs(std::initializer_list<const Tensor*> ts);
Tensor widen(const Tensor& t);
Tensor narrow(const Tensor& t, DType d);
// A GEMM-like op on 16-bit operands that the device's gemm reads itself
// (BackendDevice::gemm_reads): true when a and b share `h`, the dtype
// half_inputs gave for all the op's inputs (so the result's dtype is theirs,
// as the fallback's would be). The op then runs the gemm kernel on them
// (f32 sums, f32 result, rounded once) instead of widening them first.
bool native_half_gemm(std::optional<DType> h, const Tensor& a, const Tensor& b);
// The dtype the gemm `p` on a's device writes: p.ab_dtype when it is 16-bit
// and the device's gemm writes it for this product
// (BackendDevice::gemm_writes), else f32 (rounded to ab_dtype afterwards by
// the op: one cast more).
DType gemm_out_dtype(const Tensor& a, GemmParams p);
// autocast (switchyard/amp.h). An op of the low-precision list starts with
// `if (auto d = autocast_cast({&a, &b})) return op(cast_to(a, *d), ...)`:
// the autocast dtype when a floating input is of another dtype (so the
// recursion ends), else empty. An op of the f32 list returns its 16-bit
// fallback's f32 result as is under autocast: f32_result(d) is f32 there,
// d otherwise.
std::optional<DType> autocast_cast(std::initializer_list<const Tensor*> ts);
Tensor cast_to(const Tensor& t, DType d);  // floating t to d; others as they are
DType f32_result(DType d);
// autocast off on this thread while it lives (backward(), GradScaler).
class AutocastOff {
 public:
  AutocastOff();
  ~AutocastOff();
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  std::optional<DType> prev_;
};
// 1 where x is infinite or NaN, 0 elsewhere (f32; read from the bits, so no
// float mode of a device can change it); no gradient.
Tensor nonfinite(const Tensor& x);
// A node running kernel `p` on `in` (arguments 1.., argument 0 the result).
Tensor node(std::initializer_list<Tensor> in, Shape shape, DType t, const KernelParams& p);
// Records the backward of `out` when grad mode is on and an input needs it.
using Backward = std::function<std::vector<Tensor>(const Tensor&)>;
Tensor with_grad(Tensor out, const char* name, std::initializer_list<Tensor> inputs, Backward bw);
Tensor with_grad(Tensor out, const char* name, const std::vector<Tensor>& inputs, Backward bw);
int64_t norm_axis(const char* op, const Tensor& x, int64_t dim);
// The random generator's seed and the next Philox stream (the offset taken),
// as rand() draws them: a tensor's own stream.
RandomState take_random_stream();
// batch_norm with what nn::BatchNorm adds: num_batches_tracked (an i64
// scalar, incremented when training, in the launch that blends the running
// statistics) and a following ReLU fused into the normalization (and its
// backward into batch norm's).
// linear(x, w, b), then a ReLU when `relu` (in the GEMM's epilogue).
Tensor linear_act(const Tensor& x, const Tensor& w, const Tensor& b, bool relu);

Tensor batch_norm_fused(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                        const Tensor& weight, const Tensor& bias, bool training, float momentum,
                        float eps, Tensor* num_batches_tracked, bool relu, int64_t pool = 0);

}  // namespace switchyard::detail
