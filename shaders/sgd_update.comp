// SPDX-License-Identifier: MIT
// sgd_update, IN PLACE on p: p -= lr * (g + weight_decay * p). args p, g;
// SgdParams. One invocation per 4 elements, vec4 when aligned.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
SgdParams q;
void vec_item(Op p, uint k) {
  vec4 w = V(0)[VO(0) + k];
  V(0)[VO(0) + k] = w - q.lr * (V(1)[VO(1) + k] + q.weight_decay * w);
}
void one_item(Op p, uint j) {
  float w = F(0)[O(0) + j];
  F(0)[O(0) + j] = w - q.lr * (F(1)[O(1) + j] + q.weight_decay * w);
}
void main() {
  Op p = load_op();
  q = load_SgdParams();
  ELEMENTWISE(p, uint(q.n))
}
