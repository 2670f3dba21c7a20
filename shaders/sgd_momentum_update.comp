// SPDX-License-Identifier: MIT
// sgd_momentum_update, IN PLACE on p and buf: SGD with momentum, dampening,
// weight decay and Nesterov (flags bit 6, specialized). args p, buf, g;
// SgdMomentumParams (first_step: buf = d). One invocation per 4 elements,
// vec4 when aligned.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RW(1) ARG_RO(2)
SgdMomentumParams q;
#define NESTEROV ((SPEC_FLAGS & 64u) != 0u)
void vec_item(Op p, uint k) {
  vec4 w = V(0)[VO(0) + k];
  vec4 d = V(2)[VO(2) + k] + q.weight_decay * w;
  vec4 b = q.first_step ? d : q.momentum * V(1)[VO(1) + k] + (1.0 - q.dampening) * d;
  V(1)[VO(1) + k] = b;
  V(0)[VO(0) + k] = w - q.lr * (NESTEROV ? d + q.momentum * b : b);
}
void one_item(Op p, uint j) {
  float w = F(0)[O(0) + j];
  float d = F(2)[O(2) + j] + q.weight_decay * w;
  float b = q.first_step ? d : q.momentum * F(1)[O(1) + j] + (1.0 - q.dampening) * d;
  F(1)[O(1) + j] = b;
  F(0)[O(0) + j] = w - q.lr * (NESTEROV ? d + q.momentum * b : b);
}
void main() {
  Op p = load_op();
  q = load_SgdMomentumParams();
  ELEMENTWISE(p, uint(q.n))
}
