// SPDX-License-Identifier: MIT
// binary: out = a (op) b with broadcasting over up to 4 dims (BinaryParams:
// out `dims`, element strides of a and b, 0 along a broadcast dimension;
// SPEC_OP = op).
// flags bit 1: a and b are contiguous and the same shape as out (plain vec4
// loop). One invocation per 4 consecutive output elements.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2)
float apply(int op, float a, float b) {
  switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_EQ: return a == b ? 1.0 : 0.0;
    case B_NE: return a != b ? 1.0 : 0.0;
    case B_LT: return a < b ? 1.0 : 0.0;
    case B_LE: return a <= b ? 1.0 : 0.0;
    case B_GT: return a > b ? 1.0 : 0.0;
    case B_GE: return a >= b ? 1.0 : 0.0;
  }
  return 0.0;
}
vec4 apply4(int op, vec4 a, vec4 b) {
  switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
  }
  return vec4(apply(op, a.x, b.x), apply(op, a.y, b.y), apply(op, a.z, b.z), apply(op, a.w, b.w));
}
void vec_item(Op p, uint k) { V(0)[VO(0) + k] = apply4(p.op, V(1)[VO(1) + k], V(2)[VO(2) + k]); }
void one_item(Op p, uint j) { F(0)[O(0) + j] = apply(p.op, F(1)[O(1) + j], F(2)[O(2) + j]); }
void main() {
  Op p = load_op();
  BinaryParams q = load_BinaryParams();
  uint d1 = uint(q.dims[1]), d2 = uint(q.dims[2]), d3 = uint(q.dims[3]);
  uint n = uint(q.dims[0]) * d1 * d2 * d3;
  if ((p.flags & 2u) != 0u) {  // a and b laid out like out: a plain elementwise loop
    ELEMENTWISE(p, n)
    return;
  }
  FOR_ITEMS(k, (n + 3u) / 4u) {
    for (uint j = 4u * k; j < min(4u * k + 4u, n); ++j) {
      uint i3 = j % d3, r = j / d3;
      uint i2 = r % d2; r /= d2;
      uint i1 = r % d1, i0 = r / d1;
      int ia = int(i0) * q.a_strides[0] + int(i1) * q.a_strides[1] + int(i2) * q.a_strides[2] +
               int(i3) * q.a_strides[3];
      int ib = int(i0) * q.b_strides[0] + int(i1) * q.b_strides[1] + int(i2) * q.b_strides[2] +
               int(i3) * q.b_strides[3];
      F(0)[O(0) + j] = apply(p.op, F(1)[int(O(1)) + ia], F(2)[int(O(2)) + ib]);
    }
  }
}
