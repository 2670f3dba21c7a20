// SPDX-License-Identifier: MIT
// Ops: each checks shapes, dtypes and devices, builds a graph node and, when
// an input requires grad, records its backward (written with ops).
#pragma once
#include "switchyard/tensor.h"

namespace switchyard {

// a @ b with optional transposes: (M,K) x (K,N) -> (M,N). Without
// transposes also PyTorch's other shapes: (..., M, K) x (K, N) -> (..., M, N),
// stacks of matrices with equal leading dims (..., M, K) x (..., K, N) (bmm),
// and 1-D operands (a vector times a matrix, a matrix times a vector, a dot).
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// x (..., in), weight (out, in) [PyTorch layout], bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
Tensor transpose(const Tensor& x);  // 2-D
// x with dimensions d0 and d1 exchanged (negative counts from the end), as
// torch.transpose but a contiguous copy: one swap_axes kernel for
// neighbouring dimensions, two otherwise. 4-byte dtypes.
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);

// Elementwise with broadcasting (numpy rules, any number of dims).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, float s);
Tensor sub(const Tensor& a, float s);
Tensor mul(const Tensor& a, float s);
Tensor div(const Tensor& a, float s);
Tensor rsub(float s, const Tensor& a);  // s - a
Tensor neg(const Tensor& a);
// Comparisons, with broadcasting: u8 tensors, 1 where true (PyTorch gives
// bool), no gradient. Integer inputs are compared as f32.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, float s);
Tensor ne(const Tensor& a, float s);
Tensor lt(const Tensor& a, float s);
Tensor le(const Tensor& a, float s);
Tensor gt(const Tensor& a, float s);
Tensor ge(const Tensor& a, float s);

Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // tanh approximation, as PyTorch's approximate="tanh"
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor abs(const Tensor& x);

Tensor sum(const Tensor& x);  // all elements -> scalar
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
// Broadcast x to `shape` (numpy rules).
Tensor expand(const Tensor& x, const Shape& shape);
// Sum x down to `shape` (the adjoint of expand).
Tensor sum_to(const Tensor& x, const Shape& shape);

// Along any dim: another than the last is moved last and back (transpose).
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// logits (B,C) f32, labels (B) i32 or i64: mean over the batch of -log_softmax[label].
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);
Tensor mse_loss(const Tensor& input, const Tensor& target);  // mean
Tensor argmax(const Tensor& x, int64_t dim = -1);            // last dim; i32

// Zeroes each element with probability p and scales the rest by 1/(1-p), when
// `training`; x itself otherwise. The mask comes from the counter-based
// generator (rand), so a seed gives the same mask on every backend.
// Composed from rand, a comparison and products (one fused kernel later).
Tensor dropout(const Tensor& x, float p, bool training = true);
// Normalizes over the last dimension: (x - mean) / sqrt(var + eps), var
// biased, as PyTorch's layer_norm; then * weight + bias when given (shape:
// the last dimension). Composed from the last-axis reductions and
// broadcasting, so its backward comes from theirs.
Tensor layer_norm(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  float eps = 1e-5f);

// ---- batched matmul, convolution, pooling, batch norm -------------------------

// Tensors joined along dimension 0 (the only one supported so far): f32,
// equal trailing shapes, one device. Each is padded into place and the
// results added (exact: the padding is zeros).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);

// Rows of weight (num_embeddings, dim) picked by integer indices (i32 or
// i64, any shape) -> (*indices.shape, dim), as torch.nn.functional.embedding.
// An index outside [0, num_embeddings) is an error (raised when the device
// runs it). The gradient adds the rows of each index, in the order of the
// indices: deterministic, the same on every device.
Tensor embedding(const Tensor& indices, const Tensor& weight);

// (B, M, K) x (B, K, N) -> (B, M, N): B products in one batched GEMM.
Tensor bmm(const Tensor& a, const Tensor& b);

// A 2-D window's size, stride, padding or dilation: (rows, cols), or one
// number for both, as PyTorch's int-or-tuple arguments.
struct Size2 {
  Size2(int64_t both = 0) : h(both), w(both) {}  // NOLINT: implicit, as PyTorch's ints
  Size2(int64_t rows, int64_t cols) : h(rows), w(cols) {}
  int64_t h, w;
};

// x (N, C, H, W), weight (out_channels, C/groups, kH, kW), bias (out_channels)
// or undefined -> (N, out_channels, OH, OW), as torch.nn.functional.conv2d.
// Two lowerings (conv_algorithm below). im2col: im2col plus one batched
// GEMM over all groups (bias fused) and a layout pass; backward two GEMMs,
// col2im and layout passes. implicit_gemm: one kernel forward (bias fused),
// two backward (the input gradient; the weight gradient in partial sums,
// plus one reduction), reading the input in place, never expanded. A batch
// whose input, output or im2col matrix would pass 64 MiB runs in chunks of
// samples.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              Size2 stride = 1, Size2 padding = 0, Size2 dilation = 1, int64_t groups = 1);
// Which lowering conv2d records from now on: read from SWITCHYARD_CONV
// (auto, im2col or implicit) at first use, else automatic: implicit_gemm on
// every backend (one launch each way, no expanded matrix in memory; on the
// CPU as fast as im2col's whole-batch GEMM or faster: docs/benchmarks.md,
// "Convolution lowerings").
enum class ConvAlgorithm { automatic, im2col, implicit_gemm };
void set_conv_algorithm(ConvAlgorithm a);
ConvAlgorithm conv_algorithm();
// Pooling over the last two dimensions of (N, C, H, W) or (C, H, W). stride 0
// means the kernel size (PyTorch's default); padding at most half the kernel.
// max_pool2d's gradient goes to the first maximum of each window.
Tensor max_pool2d(const Tensor& x, Size2 kernel, Size2 stride = 0, Size2 padding = 0);
Tensor avg_pool2d(const Tensor& x, Size2 kernel, Size2 stride = 0, Size2 padding = 0,
                  bool count_include_pad = true);
// Output 1x1 (global average pooling), or any size that divides the input.
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output = 1);
// Normalizes each channel (dimension 1) of (N, C, ...) as
// torch.nn.functional.batch_norm. Training: over the batch's statistics
// (biased variance), and when running_mean/var are given they blend in
// place, r = (1 - momentum) r + momentum * stat (the unbiased variance).
// Evaluation: over the running statistics. weight and bias (C) may be
// undefined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, float momentum = 0.1f,
                  float eps = 1e-5f);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, float s) { return add(a, s); }
inline Tensor operator-(const Tensor& a, float s) { return sub(a, s); }
inline Tensor operator*(const Tensor& a, float s) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, float s) { return div(a, s); }
inline Tensor operator+(float s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(float s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator*(float s, const Tensor& a) { return mul(a, s); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, float s) { return eq(a, s); }
inline Tensor operator!=(const Tensor& a, float s) { return ne(a, s); }
inline Tensor operator<(const Tensor& a, float s) { return lt(a, s); }
inline Tensor operator<=(const Tensor& a, float s) { return le(a, s); }
inline Tensor operator>(const Tensor& a, float s) { return gt(a, s); }
inline Tensor operator>=(const Tensor& a, float s) { return ge(a, s); }
inline Tensor operator==(float s, const Tensor& a) { return eq(a, s); }
inline Tensor operator!=(float s, const Tensor& a) { return ne(a, s); }
inline Tensor operator<(float s, const Tensor& a) { return gt(a, s); }
inline Tensor operator<=(float s, const Tensor& a) { return ge(a, s); }
inline Tensor operator>(float s, const Tensor& a) { return lt(a, s); }
inline Tensor operator>=(float s, const Tensor& a) { return le(a, s); }

}  // namespace switchyard
