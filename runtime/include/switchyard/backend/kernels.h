// SPDX-License-Identifier: MIT
// The kernel table: every kernel a backend implements, named once, with its
// typed parameters and what a launch needs to know of it (which arguments it
// writes, whether it reports bad input, whether it has a subgroup build).
// Dispatch in every backend, the Vulkan launch table and its GLSL mirror
// (generated from these lists), the scheduler's plan keys, the conformance
// suite and the op benchmarks all read it. See docs/adding-an-op.md.
//
// C++17 (the CUDA kernels include it too).
#pragma once
// Marks the backend API, so user-only code can check it stays out.
#define SWITCHYARD_BACKEND_API 1
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "switchyard/dtype.h"

namespace switchyard {

// ---- pointwise codes ---------------------------------------------------------
// X(name): the modes of the unary, unary_backward and binary
// kernels (and gemm's fused activation). The GLSL shaders get the same codes
// as U_<name> / B_<name> constants, generated from these lists.
// clang-format off
#define SWITCHYARD_UNARY_OPS(X)                                                 \
  X(none) X(relu) X(gelu) X(tanh) X(sigmoid) X(exp) X(log) X(sqrt) X(square) X(abs) \
  X(nonfinite)
#define SWITCHYARD_BINARY_OPS(X) X(add) X(sub) X(mul) X(div) X(eq) X(ne) X(lt) X(le) X(gt) X(ge)
// clang-format on

enum class Unary : int32_t {
#define SY_ENUM_ENTRY(name) name,
  SWITCHYARD_UNARY_OPS(SY_ENUM_ENTRY)
};
enum class Binary : int32_t { SWITCHYARD_BINARY_OPS(SY_ENUM_ENTRY) };
#undef SY_ENUM_ENTRY
#define SY_COUNT_ENTRY(name) +1
constexpr int kNumUnary = 0 SWITCHYARD_UNARY_OPS(SY_COUNT_ENTRY);
constexpr int kNumBinary = 0 SWITCHYARD_BINARY_OPS(SY_COUNT_ENTRY);
#undef SY_COUNT_ENTRY

// ---- parameters ----------------------------------------------------------------
// Each kernel's parameters are a field list, SY_PARAMS_<kernel>(I, D, W, A, F):
//   I(type, name)         an integer (int64_t, bool, DType, Unary, Binary) that
//                         is part of the Program's shape: it keys the plan
//   D(type, name)         an integer that may change between runs of one Program
//   W(name)               a 64-bit word that may change between runs (RNG state)
//   A(type, name, count)  a fixed-size integer array, part of the plan key
//   F(name)               a float; may change between runs
// From each list come a struct (<Kernel>Params below), its encoding into
// KernelParams, and the GLSL struct the shader reads (backends/vulkan).
// Shapes are given as the kernel sees its arguments; see each shader's and
// each .cu file's header for launch geometry.

// One line per field list and table entry (CMake reads the table too):
// clang-format off
// out = value. out has n elements of `dtype`.
#define SY_PARAMS_fill(I, D, W, A, F) I(int64_t, n) I(DType, dtype) F(value)
// out[k] = start + k * step, n elements of `dtype`.
#define SY_PARAMS_arange(I, D, W, A, F) I(int64_t, n) I(DType, dtype) F(start) F(step)
// out = Philox4x32-10 uniform in [low, high), n f32. Stream `offset` of `seed`.
#define SY_PARAMS_rand_uniform(I, D, W, A, F) I(int64_t, n) W(seed) W(offset) F(low) F(high)
// out = normal(mean, std), Box-Muller on the same Philox stream as rand_uniform.
#define SY_PARAMS_rand_normal(I, D, W, A, F) I(int64_t, n) W(seed) W(offset) F(mean) F(std)
// dropout: out = in * (u >= p ? scale : 0), n f32, u element k's uniform draw
// of rand_uniform's stream `offset` of `seed` in [0, 1): the mask is never
// stored, and the backward runs the same kernel on dy with the same stream.
#define SY_PARAMS_dropout(I, D, W, A, F) I(int64_t, n) W(seed) W(offset) F(p) F(scale)
// out (to) = in (from), n elements.
#define SY_PARAMS_cast(I, D, W, A, F) I(int64_t, n) I(DType, from) I(DType, to)
// out[c, r] = in[r, c]: in is rows x cols of elem_size-byte elements.
#define SY_PARAMS_transpose(I, D, W, A, F) I(int64_t, rows) I(int64_t, cols) I(int64_t, elem_size)
// out = zeros(total) with out[begin, begin + len) = in (f32): a row slice's backward.
#define SY_PARAMS_pad(I, D, W, A, F) I(int64_t, begin) I(int64_t, len) I(int64_t, total)
// out (m x n) = act(alpha * op(A) op(B) + bias): args out, A, B[, bias].
// op(A) is m x k (A stored k x m when trans_a); op(B) is k x n (n x k when trans_b).
// `batch` products (0 counts as 1): product b reads A + b*stride_a, B + b*stride_b
// and writes out + b*stride_c (element strides; 0 shares one operand). The bias
// is bias[j] per column, or bias[b*m + i] per row when bias_rows (a convolution's
// channels, group b). lda and ldb are A's and B's row strides as stored (0: packed,
// their stored row length), so a product can read columns [k0, k0 + k) of wider
// matrices: a split of K into batched products. ab_dtype is A's and B's
// element type: f32, or bf16/f16 (read widened; the sums and the bias stay
// f32). c_dtype is out's: f32, or bf16/f16 where the device's gemm_writes
// says so (the f32 result, bias and activation included, rounded once).
#define SY_PARAMS_gemm(I, D, W, A, F)                                                  \
  I(int64_t, m) I(int64_t, n) I(int64_t, k) I(bool, trans_a) I(bool, trans_b) I(bool, has_bias) \
  I(Unary, act) I(bool, bias_rows) I(int64_t, batch) I(int64_t, stride_a) I(int64_t, stride_b)  \
  I(int64_t, stride_c) I(int64_t, lda) I(int64_t, ldb) I(DType, ab_dtype) I(DType, c_dtype)     \
  F(alpha)
// out[o, j, i, e] = in[o, i, j, e]: in is (outer, a, b, inner) of 32-bit elements.
#define SY_PARAMS_swap_axes(I, D, W, A, F) I(int64_t, outer) I(int64_t, a) I(int64_t, b) I(int64_t, inner)
// The im2col lowering (SWITCHYARD_CONV=im2col, ops.h): x (batch, channels, height, width) NCHW, a kernel of
// kernel[0] x kernel[1] taps with stride, padding and dilation (rows, cols),
// output out_h x out_w. im2col: cols[(c, kh, kw), (n, oh, ow)] =
// x[n, c, oh*s0 - p0 + kh*d0, ow*s1 - p1 + kw*d1] (0 outside): args cols, x.
// col2im, its adjoint: dx[n, c, h, w] = sum of the cols entries that read it,
// gathered per element (deterministic): args dx, cols.
#define SY_PARAMS_im2col(I, D, W, A, F)                                                   \
  I(int64_t, batch) I(int64_t, channels) I(int64_t, height) I(int64_t, width)              \
  A(int64_t, kernel, 2) A(int64_t, stride, 2) A(int64_t, padding, 2) A(int64_t, dilation, 2) \
  I(int64_t, out_h) I(int64_t, out_w)
#define SY_PARAMS_col2im(I, D, W, A, F) SY_PARAMS_im2col(I, D, W, A, F)
// Convolution geometry (NCHW): x (batch, channels, height, width), weight
// (out_channels, channels/groups, kernel[0], kernel[1]), stride, padding and
// dilation per (rows, cols); y (batch, out_channels, OH, OW) with
// OH = (height + 2*padding[0] - dilation[0]*(kernel[0] - 1) - 1) / stride[0] + 1
// (OW likewise, conv_out_size below). Each kernel is an implicit GEMM per
// group: its operands are read in place, never expanded (no im2col).
// conv2d: y = act(conv(x, w) + bias[oc] when has_bias): args y, x, w[, bias].
// conv2d_backward_input: dx, the adjoint of conv2d in x applied to dy,
// gathered per dx element (deterministic): args dx, dy, w.
// conv2d_backward_weight: the weight gradient in `splits` partial sums, out
// (splits, out_channels, channels/groups*kernel[0]*kernel[1]); split s sums
// the flattened (sample, output pixel) positions [s*len, min((s+1)*len, P))
// with P = batch*OH*OW and len = ceil(P / splits): args out, dy, x. (The
// order within a sum is the backend's: a backend's own kernels keep one
// order, cuDNN its algorithm's.)
#define SY_CONV_GEOMETRY(I, A)                                                             \
  I(int64_t, batch) I(int64_t, channels) I(int64_t, height) I(int64_t, width)              \
  I(int64_t, out_channels) I(int64_t, groups) A(int64_t, kernel, 2) A(int64_t, stride, 2)  \
  A(int64_t, padding, 2) A(int64_t, dilation, 2)
#define SY_PARAMS_conv2d(I, D, W, A, F) SY_CONV_GEOMETRY(I, A) I(bool, has_bias) I(Unary, act)
#define SY_PARAMS_conv2d_backward_input(I, D, W, A, F) SY_CONV_GEOMETRY(I, A)
#define SY_PARAMS_conv2d_backward_weight(I, D, W, A, F) SY_CONV_GEOMETRY(I, A) I(int64_t, splits)
// Pooling geometry: `planes` (batch x channels) planes of height x width, windows
// of kernel[0] x kernel[1] with stride and padding, output out_h x out_w.
// max_pool2d: y = the window's maximum (padding never wins, the last NaN does) and
// idx (i32) = its h * width + w in the plane (the first maximum), in one
// buffer of 2 x planes*out_h*out_w words, y's then idx's (a graph node has
// one result): args out, x.
// With affine, each input value of plane p is first taken to
// (v - k[0][c]) * k[1][c] + k[2][c], c = p % channels, for the rows k[r] of
// a third argument coef (3 x channels), then to max(v, 0) with relu: batch
// norm and its ReLU fused into the pooling that follows them (their full-size
// output is never written).
// max_pool2d_backward: dx[h, w] = sum of dy over the windows whose idx is (h, w),
// gathered per element: args dx, dy, idx.
#define SY_POOL_GEOMETRY(I, A)                                                      \
  I(int64_t, planes) I(int64_t, height) I(int64_t, width) A(int64_t, kernel, 2)     \
  A(int64_t, stride, 2) A(int64_t, padding, 2) I(int64_t, out_h) I(int64_t, out_w)
#define SY_PARAMS_max_pool2d(I, D, W, A, F) \
  SY_POOL_GEOMETRY(I, A) I(int64_t, channels) I(bool, affine) I(bool, relu)
#define SY_PARAMS_max_pool2d_backward(I, D, W, A, F) SY_POOL_GEOMETRY(I, A)
// avg_pool2d: y = the window's mean, dividing by the whole window when
// count_include_pad (PyTorch's default), else by its taps inside the plane:
// args y, x. avg_pool2d_backward: dx from dy, gathered per element: args dx, dy.
#define SY_PARAMS_avg_pool2d(I, D, W, A, F) SY_POOL_GEOMETRY(I, A) I(bool, count_include_pad)
#define SY_PARAMS_avg_pool2d_backward(I, D, W, A, F) SY_PARAMS_avg_pool2d(I, D, W, A, F)
// out = a (op) b over a 4-D output `dims`, inputs read through element
// strides (0 along a broadcast dimension).
#define SY_PARAMS_binary(I, D, W, A, F) \
  I(Binary, op) A(int64_t, dims, 4) A(int64_t, a_strides, 4) A(int64_t, b_strides, 4)
// out = scale * in + shift, n elements.
#define SY_PARAMS_affine(I, D, W, A, F) I(int64_t, n) F(scale) F(shift)
// out = op(in), n elements.
#define SY_PARAMS_unary(I, D, W, A, F) I(Unary, op) I(int64_t, n)
// dx = dy * op'(x, y): args dx, dy, x, y (y = op(x)), n elements.
#define SY_PARAMS_unary_backward(I, D, W, A, F) I(Unary, op) I(int64_t, n)
// out[o, i] = scale * sum_l in[o, l, i].
#define SY_PARAMS_reduce_sum(I, D, W, A, F) I(int64_t, outer) I(int64_t, len) I(int64_t, inner) F(scale)
// out[o, l, i] = scale * in[o, i]: broadcast along a new middle axis.
#define SY_PARAMS_expand(I, D, W, A, F) I(int64_t, outer) I(int64_t, len) I(int64_t, inner) F(scale)
// Row-wise softmax, or log_softmax when `log`, of a rows x cols matrix.
#define SY_PARAMS_softmax(I, D, W, A, F) I(int64_t, rows) I(int64_t, cols) I(bool, log)
// dx from dy and the forward output y: softmax y*(dy - sum(dy*y)); log_softmax
// dy - exp(y)*sum(dy). args dx, dy, y.
#define SY_PARAMS_softmax_backward(I, D, W, A, F) I(int64_t, rows) I(int64_t, cols) I(bool, log)
// loss[1] = mean_r (logsumexp(x_r) - x_r[label_r]): args loss, x, labels (i32).
#define SY_PARAMS_cross_entropy(I, D, W, A, F) I(int64_t, rows) I(int64_t, cols)
// dx = (softmax(x) - onehot(label)) * dloss / rows: args dx, x, labels, dloss[1].
#define SY_PARAMS_cross_entropy_backward(I, D, W, A, F) I(int64_t, rows) I(int64_t, cols)
// out[r] = argmax_c x[r, c] (i32, the first maximum). args out, x.
#define SY_PARAMS_argmax(I, D, W, A, F) I(int64_t, rows) I(int64_t, cols)
// IN PLACE on p: p -= lr * (g + weight_decay * p). args p, g; n elements.
#define SY_PARAMS_sgd_update(I, D, W, A, F) I(int64_t, n) F(lr) F(weight_decay)
// IN PLACE on p and buf: SGD with momentum, dampening, weight decay and
// Nesterov, as torch.optim.SGD. args p, buf, g. first_step: buf = g.
#define SY_PARAMS_sgd_momentum_update(I, D, W, A, F) \
  I(int64_t, n) I(bool, nesterov) D(bool, first_step) F(lr) F(momentum) F(dampening) F(weight_decay)
// IN PLACE on p, m, v: Adam, or AdamW when `decoupled`. args p, m, v, g,
// step[1] (f32, already incremented on the device).
#define SY_PARAMS_adam_update(I, D, W, A, F) \
  I(int64_t, n) I(bool, decoupled) F(lr) F(beta1) F(beta2) F(eps) F(weight_decay)
// adam_update over `tensors` parameters in one launch (kMultiTensor), each
// with its own step count, incremented IN PLACE by the same launch (each
// tensor's update uses the incremented value). Arguments (more_args):
// p_i, m_i, v_i, step_i (written) for each tensor i, then g_i for each;
// tensor i has the element count of its p_i's bytes / 4.
#define SY_PARAMS_adam_multi(I, D, W, A, F) \
  I(int64_t, tensors) I(bool, decoupled) F(lr) F(beta1) F(beta2) F(eps) F(weight_decay)
// sgd_update (has_buf: sgd_momentum_update) over `tensors` parameters in one
// launch (kMultiTensor), IN PLACE. Arguments (more_args): p_i (and buf_i
// with has_buf) for each tensor i, written, then g_i for each; tensor i has
// the element count of its p_i's bytes / 4.
#define SY_PARAMS_sgd_multi(I, D, W, A, F) \
  I(int64_t, tensors) I(bool, has_buf) I(bool, nesterov) D(bool, first_step) F(lr) F(momentum) \
  F(dampening) F(weight_decay)

// Per-channel kernels over (outer, channels, inner), batch norm's passes.
// channel_stats: out[c] = the mean of channel c, out[channels + c] = its biased
// variance (two passes over the data): args out (2 x channels), x.
#define SY_PARAMS_channel_stats(I, D, W, A, F) I(int64_t, outer) I(int64_t, channels) I(int64_t, inner)
// channel_sums: out[c] = sum of a over channel c, out[channels + c] = sum of
// a * (b - mean[c]) (centered: no cancellation when b's mean is large):
// args out (2 x channels), a, b, mean (channels), and with relu_mask a
// fifth, r (like a): a counts as 0 where r > 0 fails (the backward of a
// ReLU whose output is r, fused).
// With pool > 0 (the pooled form), a is the gradient of a max pooling of
// pool x pool windows with stride pool and no padding over the planes
// (inner / width, width), and r is that pooling's packed output (maxima,
// then indices: max_pool2d's); a's value at an element is the gradient of
// the window whose index is that element, 0 elsewhere (the pooling's
// backward, fused), and with relu_mask 0 too where the window's maximum
// > 0 fails (the ReLU before the pooling, fused).
#define SY_PARAMS_channel_sums(I, D, W, A, F) \
  SY_PARAMS_channel_stats(I, D, W, A, F) I(bool, relu_mask) I(int64_t, pool) I(int64_t, width)
// channel_affine: y = (a - k[0][c]) * k[1][c] + k[2][c], plus (b - k[3][c]) * k[4][c]
// with has_b, for the rows k[r] of coef: args y, a, b (ignored without has_b),
// coef (3, or 5 with has_b, x channels), and r with relu_mask (a counts as 0
// where r > 0 fails, as channel_sums; pool > 0: a and r in channel_sums'
// pooled form, y like b). relu: y = max(y, 0) (a ReLU after batch norm,
// fused).
#define SY_PARAMS_channel_affine(I, D, W, A, F)                                     \
  SY_PARAMS_channel_stats(I, D, W, A, F) I(bool, has_b) I(bool, relu) I(bool, relu_mask) \
      I(int64_t, pool) I(int64_t, width)
// Batch norm's per-channel coefficients, one launch each way (in place of
// a dozen vector ops). batch_norm_coef: inv = 1 / sqrt(var[c] + eps), out
// (4, channels) = [mean, inv * weight (inv without has_weight), bias (0
// without has_bias), inv]: channel_affine's rows and inv. args out, mean,
// var, weight, bias (weight and bias ignored unless has_weight, has_bias).
#define SY_PARAMS_batch_norm_coef(I, D, W, A, F) \
  I(int64_t, channels) I(bool, has_weight) I(bool, has_bias) F(eps)
// batch_norm_coef_backward: from the forward's coef (4, channels) and sums
// (2, channels) = (sum of dy, sum of dy * (x - mean)) over `count` values a
// channel: out (6, channels) = [0, scale, k0, mean, k, dweight], channel_affine's
// rows for dx = dy * scale + (x - mean) * k + k0 with, when training,
// k = -scale * inv^2 * sums[1] / count and k0 = -scale * sums[0] / count (else
// 0), and the weight's gradient inv * sums[1]. args out, coef, sums.
#define SY_PARAMS_batch_norm_coef_backward(I, D, W, A, F) \
  I(int64_t, channels) I(int64_t, count) I(bool, training)
// batch_norm_running: IN PLACE on the running statistics, as PyTorch:
// rm = (1 - momentum) rm + momentum * mean, rv likewise with the unbiased
// variance var * count / (count - 1). args rm, rv, stats (2, channels: mean,
// biased var); with `has_count`, args rm, rv, num_batches_tracked (one i64,
// incremented), stats. (Argument 2 is marked written for both forms: the
// stats it is without a count are only read.)
#define SY_PARAMS_batch_norm_running(I, D, W, A, F) \
  I(int64_t, channels) I(int64_t, count) I(bool, has_count) F(momentum)
// embedding: out (n, dim) = rows idx[i] (i32) of weight (num, dim): args out,
// weight, idx. An index outside [0, num) sets the status word and gives a NaN
// row. `ranges` is the backward's.
#define SY_PARAMS_embedding(I, D, W, A, F) I(int64_t, n) I(int64_t, num) I(int64_t, dim) I(int64_t, ranges)
// embedding_backward: dw (num, dim), row v = the sum of the rows i of dy with
// idx[i] == v, added in the order of i: deterministic, without atomics (one
// invocation per dimension and per range of rows: `ranges` ranges of
// ceil(num / ranges) rows, each invocation reading every index). Indices
// outside [0, num) add nothing (the forward reported them): args dw, dy, idx.
#define SY_PARAMS_embedding_backward(I, D, W, A, F) SY_PARAMS_embedding(I, D, W, A, F)

// A user's kernel (switchyard/custom.h): `id` is its entry in the registry
// of custom kernels; its first `outputs` arguments are written, the rest only
// read; `grid` is its workgroups (CUDA blocks) per dimension, from its grid
// function; w0-w7 carry its scalar parameters (at most 64 bytes, a struct
// the user declares on each side), and may change between runs.
#define SY_PARAMS_custom(I, D, W, A, F)                                              \
  I(int64_t, id) I(int64_t, outputs) A(int64_t, grid, 3) W(w0) W(w1) W(w2) W(w3) W(w4) \
  W(w5) W(w6) W(w7)

// ---- the table ---------------------------------------------------------------------
// X(kernel, Params struct, buffer args, written args (bit mask), traits).
// Arguments the mask leaves out are only read.
enum KernelTraits : uint32_t {
  kNoTraits = 0,
  kReportsStatus = 1,  // sets the device's status word on bad input (labels, indices)
  kSubgroup = 2,       // Vulkan: also built with subgroup arithmetic (<name>_sg)
  // A user's kernel: its code, arguments and writes come from the registry
  // of custom kernels (its params' id), not from this table; no built-in
  // shader or conformance case.
  kUserKernel = 4,
  // A multi-tensor kernel: one launch over a list of tensors (every
  // parameter of an optimizer step), its arguments in Program::more_args
  // (Instr::more); CPU, CUDA and Vulkan run it, a backend without it
  // takes the per-tensor kernel (Device::supports says which).
  kMultiTensor = 8,
  // Reads a Philox stream whose `offset` param (a W field) is new at every
  // call (dropout, the random fills): CUDA graphs read it from device
  // memory, so a step with dropout replays one graph unchanged.
  kRandomStream = 16,
  // Reads a learning rate, its `lr` param (an F field), that a scheduler may
  // change at every step: CUDA graphs read it from device memory as they do
  // a random stream's offset, so a step replays one graph unchanged (Vulkan's
  // launch table holds every param already).
  kLearningRate = 32,
};

#define SWITCHYARD_KERNELS(X)                                                        \
  X(fill, FillParams, 1, 0b1, kNoTraits)                                             \
  X(arange, ArangeParams, 1, 0b1, kNoTraits)                                         \
  X(rand_uniform, RandUniformParams, 1, 0b1, kRandomStream)                          \
  X(rand_normal, RandNormalParams, 1, 0b1, kRandomStream)                            \
  X(dropout, DropoutParams, 2, 0b1, kRandomStream)                                   \
  X(cast, CastParams, 2, 0b1, kNoTraits)                                             \
  X(transpose, TransposeParams, 2, 0b1, kNoTraits)                                   \
  X(pad, PadParams, 2, 0b1, kNoTraits)                                               \
  X(gemm, GemmParams, 4, 0b1, kSubgroup)                                             \
  X(swap_axes, SwapAxesParams, 2, 0b1, kNoTraits)                                    \
  X(im2col, Im2colParams, 2, 0b1, kNoTraits)                                         \
  X(col2im, Col2imParams, 2, 0b1, kNoTraits)                                         \
  X(conv2d, Conv2dParams, 4, 0b1, kSubgroup)                                         \
  X(conv2d_backward_input, Conv2dBackwardInputParams, 3, 0b1, kSubgroup)             \
  X(conv2d_backward_weight, Conv2dBackwardWeightParams, 3, 0b1, kSubgroup)           \
  X(max_pool2d, MaxPool2dParams, 3, 0b1, kNoTraits)                                  \
  X(max_pool2d_backward, MaxPool2dBackwardParams, 3, 0b1, kNoTraits)                 \
  X(avg_pool2d, AvgPool2dParams, 2, 0b1, kNoTraits)                                  \
  X(avg_pool2d_backward, AvgPool2dBackwardParams, 2, 0b1, kNoTraits)                 \
  X(channel_stats, ChannelStatsParams, 2, 0b1, kSubgroup)                            \
  X(channel_sums, ChannelSumsParams, 5, 0b1, kSubgroup)                              \
  X(channel_affine, ChannelAffineParams, 5, 0b1, kNoTraits)                          \
  X(batch_norm_coef, BatchNormCoefParams, 5, 0b1, kNoTraits)                         \
  X(batch_norm_coef_backward, BatchNormCoefBackwardParams, 3, 0b1, kNoTraits)        \
  X(batch_norm_running, BatchNormRunningParams, 4, 0b111, kNoTraits)                 \
  X(embedding, EmbeddingParams, 3, 0b1, kReportsStatus)                              \
  X(embedding_backward, EmbeddingBackwardParams, 3, 0b1, kNoTraits)                  \
  X(binary, BinaryParams, 3, 0b1, kNoTraits)                                         \
  X(affine, AffineParams, 2, 0b1, kNoTraits)                                         \
  X(unary, UnaryParams, 2, 0b1, kNoTraits)                                           \
  X(unary_backward, UnaryBackwardParams, 4, 0b1, kNoTraits)                          \
  X(reduce_sum, ReduceSumParams, 2, 0b1, kSubgroup)                                  \
  X(expand, ExpandParams, 2, 0b1, kNoTraits)                                         \
  X(softmax, SoftmaxParams, 2, 0b1, kSubgroup)                                       \
  X(softmax_backward, SoftmaxBackwardParams, 3, 0b1, kSubgroup)                      \
  X(cross_entropy, CrossEntropyParams, 3, 0b1, kReportsStatus | kSubgroup)           \
  X(cross_entropy_backward, CrossEntropyBackwardParams, 4, 0b1, kReportsStatus | kSubgroup) \
  X(argmax, ArgmaxParams, 2, 0b1, kNoTraits)                                         \
  X(sgd_update, SgdParams, 2, 0b1, kLearningRate)                                    \
  X(sgd_momentum_update, SgdMomentumParams, 3, 0b11, kLearningRate)                  \
  X(adam_update, AdamParams, 5, 0b111, kLearningRate)                                \
  X(adam_multi, AdamMultiParams, 0, 0b0, kMultiTensor | kLearningRate)               \
  X(sgd_multi, SgdMultiParams, 0, 0b0, kMultiTensor | kLearningRate)                 \
  X(custom, CustomParams, 5, 0b1, kUserKernel)
// clang-format on

enum class Kernel : uint8_t {
#define SY_KERNEL_ENUM(name, ...) name,
  SWITCHYARD_KERNELS(SY_KERNEL_ENUM)
#undef SY_KERNEL_ENUM
};
#define SY_KERNEL_COUNT(...) +1
constexpr int kNumKernels = 0 SWITCHYARD_KERNELS(SY_KERNEL_COUNT);
#undef SY_KERNEL_COUNT
constexpr int kMaxKernelArgs = 5;

struct KernelInfo {
  const char* name;
  int num_args;
  uint32_t writes;  // bit a: argument a is written
  uint32_t traits;  // KernelTraits
};
const KernelInfo& kernel_info(Kernel k);
inline const char* kernel_name(Kernel k) { return kernel_info(k).name; }
inline int kernel_num_args(Kernel k) { return kernel_info(k).num_args; }
inline bool kernel_writes(Kernel k, int arg) { return (kernel_info(k).writes >> arg) & 1u; }
inline bool kernel_has(Kernel k, KernelTraits t) { return (kernel_info(k).traits & t) != 0; }

// The parameter structs: one per kernel, named fields, zero-initialized.
#define SY_MEMBER_I(T, name) T name{};
#define SY_MEMBER_W(name) uint64_t name = 0;
#define SY_MEMBER_A(T, name, count) T name[count] = {};
#define SY_MEMBER_F(name) float name = 0.f;
#define SY_DEFINE_PARAMS(kernel, Params, ...)                                           \
  struct Params {                                                                       \
    SY_PARAMS_##kernel(SY_MEMBER_I, SY_MEMBER_I, SY_MEMBER_W, SY_MEMBER_A, SY_MEMBER_F) \
  };
SWITCHYARD_KERNELS(SY_DEFINE_PARAMS)
#undef SY_DEFINE_PARAMS
#undef SY_MEMBER_I
#undef SY_MEMBER_W
#undef SY_MEMBER_A
#undef SY_MEMBER_F

// A convolution's output size along one dimension (conv2d's OH and OW).
inline int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                             int64_t dilation) {
  return (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

// Which kernel a params struct belongs to, and back.
template <class P>
struct KernelOf;
template <Kernel K>
struct ParamsOf;
#define SY_MAP_PARAMS(kernel, Params, ...)          \
  template <>                                       \
  struct KernelOf<Params> {                         \
    static constexpr Kernel value = Kernel::kernel; \
  };                                                \
  template <>                                       \
  struct ParamsOf<Kernel::kernel> {                 \
    using type = Params;                            \
  };
SWITCHYARD_KERNELS(SY_MAP_PARAMS)
#undef SY_MAP_PARAMS

// Slots of the launch record: every integer field (and array element, and
// 64-bit word) takes one int slot, every float one float slot, in field order.
constexpr int kParamInts = 16;
constexpr int kParamFloats = 8;

// How one field is stored, for code that walks a kernel's fields without
// knowing its struct (the Vulkan table packer, the GLSL generator, plan keys).
struct ParamField {
  const char* name;
  char kind;         // 'I', 'D', 'W', 'A' (count elements) or 'F'
  int count;         // 1 except for arrays
  const char* type;  // C++ type name
  int slot = 0;      // first slot: an int slot, or a float slot for 'F'
};
struct ParamLayout {
  const ParamField* fields;
  int num_fields;
  int ints;    // int slots used
  int floats;  // float slots used
};
const ParamLayout& param_layout(Kernel k);

// One launch's parameters, in the slots above, tagged with their kernel.
// Made from a params struct and read back as one: backends read typed
// fields through get<P>() (or params<K>()), never slots by position.
class KernelParams {
 public:
  KernelParams() = default;
  template <class P, class = decltype(KernelOf<P>::value)>
  KernelParams(const P& p);  // NOLINT: implicit, so a struct can be passed where params go
  template <class P>
  P get() const;
  Kernel kernel() const { return kernel_; }

  // The raw slots: for code that treats every kernel alike (hashing, the
  // Vulkan table packer, plan keys); it walks param_layout(kernel()).
  const int64_t* int_slots() const { return i_; }
  const float* float_slots() const { return f_; }
  bool operator==(const KernelParams& o) const;
  bool operator!=(const KernelParams& o) const { return !(*this == o); }

 private:
  Kernel kernel_ = Kernel::fill;
  int64_t i_[kParamInts] = {};
  float f_[kParamFloats] = {};
};

namespace detail {
[[noreturn]] void params_mismatch(Kernel have, Kernel want);
// Slot counts of a field list, checked against the record at compile time.
#define SY_COUNT_I(T, name) +1
#define SY_COUNT_W(name) +1
#define SY_COUNT_A(T, name, count) +(count)
#define SY_COUNT_F(name) +1
#define SY_COUNT_NONE(...)
#define SY_CHECK_FITS(kernel, Params, ...)                                                       \
  static_assert(0 SY_PARAMS_##kernel(SY_COUNT_I, SY_COUNT_I, SY_COUNT_W, SY_COUNT_A,             \
                                     SY_COUNT_NONE) <= kParamInts,                               \
                #Params " has more integer fields than KernelParams holds");                     \
  static_assert(0 SY_PARAMS_##kernel(SY_COUNT_NONE, SY_COUNT_NONE, SY_COUNT_NONE, SY_COUNT_NONE, \
                                     SY_COUNT_F) <= kParamFloats,                                \
                #Params " has more float fields than KernelParams holds");
SWITCHYARD_KERNELS(SY_CHECK_FITS)
#undef SY_CHECK_FITS
#undef SY_COUNT_I
#undef SY_COUNT_W
#undef SY_COUNT_A
#undef SY_COUNT_F
#undef SY_COUNT_NONE

// Encode / decode one struct, generated from its field list.
template <class P>
struct ParamCodec;
#define SY_ENC_I(T, name) i[ni++] = int64_t(p.name);
#define SY_ENC_W(name) i[ni++] = int64_t(p.name);
#define SY_ENC_A(T, name, count) \
  for (int j = 0; j < (count); ++j) i[ni++] = int64_t(p.name[j]);
#define SY_ENC_F(name) f[nf++] = p.name;
#define SY_DEC_I(T, name) p.name = T(i[ni++]);
#define SY_DEC_W(name) p.name = uint64_t(i[ni++]);
#define SY_DEC_A(T, name, count) \
  for (int j = 0; j < (count); ++j) p.name[j] = T(i[ni++]);
#define SY_DEC_F(name) p.name = f[nf++];
#define SY_CODEC(kernel, Params, ...)                                                \
  template <>                                                                        \
  struct ParamCodec<Params> {                                                        \
    static void encode(const Params& p, int64_t* i, [[maybe_unused]] float* f) {     \
      [[maybe_unused]] int ni = 0, nf = 0;                                           \
      SY_PARAMS_##kernel(SY_ENC_I, SY_ENC_I, SY_ENC_W, SY_ENC_A, SY_ENC_F)           \
    }                                                                                \
    static Params decode(const int64_t* i, [[maybe_unused]] const float* f) {        \
      Params p;                                                                      \
      [[maybe_unused]] int ni = 0, nf = 0;                                           \
      SY_PARAMS_##kernel(SY_DEC_I, SY_DEC_I, SY_DEC_W, SY_DEC_A, SY_DEC_F) return p; \
    }                                                                                \
  };
SWITCHYARD_KERNELS(SY_CODEC)
#undef SY_CODEC
#undef SY_ENC_I
#undef SY_ENC_W
#undef SY_ENC_A
#undef SY_ENC_F
#undef SY_DEC_I
#undef SY_DEC_W
#undef SY_DEC_A
#undef SY_DEC_F
}  // namespace detail

template <class P, class>
KernelParams::KernelParams(const P& p) : kernel_(KernelOf<P>::value) {
  detail::ParamCodec<P>::encode(p, i_, f_);
}

template <class P>
P KernelParams::get() const {
  if (kernel_ != KernelOf<P>::value) detail::params_mismatch(kernel_, KernelOf<P>::value);
  return detail::ParamCodec<P>::decode(i_, f_);
}

// Floating-point operations of one launch, 2 per multiply-add, for the
// kernels that are products (gemm, the convolutions and im2col's GEMM
// partner excluded); 0 for the others, which memory bandwidth bounds.
uint64_t kernel_flops(const KernelParams& p);

// The typed parameters of a launch of kernel K.
template <Kernel K>
typename ParamsOf<K>::type params(const KernelParams& p) {
  return p.get<typename ParamsOf<K>::type>();
}

// A multi-tensor launch's (kMultiTensor) arguments: `per_tensor` for each of
// its `tensors`, the first `written` of them (in more_args: those of every
// tensor in turn, then each tensor's others). adam_multi: p, m, v, step | g;
// sgd_multi: p[, buf] | g.
struct MultiLayout {
  int64_t tensors;
  int per_tensor, written;
};
MultiLayout multi_layout(const KernelParams& p);

}  // namespace switchyard
