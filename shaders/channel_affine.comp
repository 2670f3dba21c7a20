// SPDX-License-Identifier: MIT
// channel_affine: y = (a - k0[c]) * k1[c] + k2[c], plus (b - k3[c]) * k4[c]
// when has_b (flag bit 1, specialized), k_r being the rows of coef, over
// (outer, C, inner) tensors (ChannelAffineParams): batch norm's
// normalization and its input gradient, centered so that a large mean
// cancels nothing. Flag bit 8: y = max(y, 0) (a following ReLU, fused);
// bit 16: a counts as 0 where argument 4 (a ReLU's output) > 0 fails (that
// ReLU's backward, fused). The pooled form (pool > 0, kernels.h): a is a
// max pooling's gradient and argument 4 its packed output; each element
// takes its window's gradient where the window's index is the element (and,
// with bit 16, its maximum > 0), else 0; one element an item.
// Dispatch: one flat elementwise pass (as unary.comp: vec4s when every
// argument is aligned and inner % 4 == 0), each item finding its channel by
// multiplies with reciprocals and one correction each way (exact below
// 2^22 items, which the host checks: flag bit 2 takes integer division),
// since CPU drivers divide integers one lane at a time. (A workgroup per
// row ran 15 times slower on lavapipe than this at the CNN's sizes.)
#version 450
#define SY_QDIV
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3) ARG_RO(4)
#define HAS_B ((SPEC_FLAGS & 2u) != 0u)
#define RELU ((SPEC_FLAGS & 8u) != 0u)
#define RELU_MASK ((SPEC_FLAGS & 16u) != 0u)

uint C, E;
float invE, invC;

// The channel of element (or vec4) `i` of rows of `len`.
uint channel(uint i, uint len, float inv) {
  uint row = qdiv(i, len, inv);
  return row - qdiv(row, C, invC) * C;
}
float coef(Op p, uint r, uint c) { return F(3)[O(3) + r * C + c]; }

void vec_item(Op p, uint k) {
  uint c = channel(k, E / 4u, invE);
  vec4 a = V(1)[VO(1) + k];
  if (RELU_MASK) a = mix(vec4(0.0), a, greaterThan(V(4)[VO(4) + k], vec4(0.0)));
  vec4 v = (a - coef(p, 0u, c)) * coef(p, 1u, c) + coef(p, 2u, c);
  if (HAS_B) v += (V(2)[VO(2) + k] - coef(p, 3u, c)) * coef(p, 4u, c);
  if (RELU) v = mix(vec4(0.0), v, greaterThan(v, vec4(0.0)));
  V(0)[VO(0) + k] = v;
}
void one_item(Op p, uint j) {
  uint c = channel(j, E, invE);
  float a = F(1)[O(1) + j];
  if (RELU_MASK && !(F(4)[O(4) + j] > 0.0)) a = 0.0;
  float v = (a - coef(p, 0u, c)) * coef(p, 1u, c) + coef(p, 2u, c);
  if (HAS_B) v += (F(2)[O(2) + j] - coef(p, 3u, c)) * coef(p, 4u, c);
  if (RELU) v = v > 0.0 ? v : 0.0;
  F(0)[O(0) + j] = v;
}

// The pooled form's element j: a from its window (P x P windows, planes of
// width W, OH x OW windows a plane, n in all).
void pooled_item(Op p, uint j, uint W, uint P, uint OH, uint OW, uint n, float invW, float invP) {
  uint r = qdiv(j, E, invE), c = r - qdiv(r, C, invC) * C, e = j - r * E;
  uint h = qdiv(e, W, invW), w = e - h * W;
  uint oh = qdiv(h, P, invP), ow = qdiv(w, P, invP);
  float a = 0.0;
  if (oh < OH && ow < OW) {
    uint k = (r * OH + oh) * OW + ow;
    if (uint(I(4)[O(4) + n + k]) == e && (!RELU_MASK || F(4)[O(4) + k] > 0.0))
      a = F(1)[O(1) + k];
  }
  float v = (a - coef(p, 0u, c)) * coef(p, 1u, c) + coef(p, 2u, c);
  if (HAS_B) v += (F(2)[O(2) + j] - coef(p, 3u, c)) * coef(p, 4u, c);
  if (RELU) v = v > 0.0 ? v : 0.0;
  F(0)[O(0) + j] = v;
}

void main() {
  Op p = load_op();
  ChannelAffineParams q = load_ChannelAffineParams();
  C = uint(q.channels), E = uint(q.inner);
  uint n = uint(q.outer) * C * E;
  if (q.pool > 0) {
    uint W = uint(q.width), P = uint(q.pool), OH = E / W / P, OW = W / P;
    invE = 1.0 / float(E);
    invC = 1.0 / float(C);
    float invW = 1.0 / float(W), invP = 1.0 / float(P);
    FOR_ITEMS(j, n) pooled_item(p, j, W, P, OH, OW, uint(q.outer) * C * OH * OW, invW, invP);
    return;
  }
  // vec4 items need whole vec4 rows; then the reciprocal is of E / 4.
  bool vec = ALIGNED4 && E % 4u == 0u;
  invE = 1.0 / float(vec ? E / 4u : E);
  invC = 1.0 / float(C);
  if (vec) {
    FOR_ITEMS(k, n / 4u) vec_item(p, k);
  } else {
    FOR_ITEMS(k, (n + 3u) / 4u)
      for (uint j = 4u * k; j < min(4u * k + 4u, n); ++j) one_item(p, j);
  }
}
