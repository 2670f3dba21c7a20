// SPDX-License-Identifier: MIT
// unary: out = op(in), n elements (UnaryParams; SPEC_OP = op). One
// invocation per 4 elements.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void vec_item(Op p, uint k) { V(0)[VO(0) + k] = unary_apply4(p.op, V(1)[VO(1) + k]); }
void one_item(Op p, uint j) { F(0)[O(0) + j] = unary_apply(p.op, F(1)[O(1) + j]); }
void main() {
  Op p = load_op();
  uint n = uint(load_UnaryParams().n);
  ELEMENTWISE(p, n)
}
