// Ops: each checks shapes, dtypes and devices, builds a graph node and, when
// an input requires grad, records its backward (written with ops).
#pragma once
#include "switchyard/tensor.h"

namespace switchyard {

// a @ b with optional transposes: (M,K) x (K,N) -> (M,N). Without
// transposes also PyTorch's other shapes: (..., M, K) x (K, N) -> (..., M, N),
// and 1-D operands (a vector times a matrix, a matrix times a vector, a dot).
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// x (..., in), weight (out, in) [PyTorch layout], bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
Tensor transpose(const Tensor& x);  // 2-D

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

Tensor softmax(const Tensor& x, int64_t dim = -1);      // last dim only
Tensor log_softmax(const Tensor& x, int64_t dim = -1);  // last dim only
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
