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
