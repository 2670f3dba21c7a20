// SPDX-License-Identifier: MIT
// affine: out = scale*in + shift (AffineParams). One invocation per 4 elements.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
AffineParams q;
void vec_item(Op p, uint k) { V(0)[VO(0) + k] = q.scale * V(1)[VO(1) + k] + q.shift; }
void one_item(Op p, uint j) { F(0)[O(0) + j] = q.scale * F(1)[O(1) + j] + q.shift; }
void main() {
  Op p = load_op();
  q = load_AffineParams();
  ELEMENTWISE(p, uint(q.n))
}
