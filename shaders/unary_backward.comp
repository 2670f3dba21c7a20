// SPDX-License-Identifier: MIT
// unary_backward: dx = dy * op'(x, y). args dx, dy, x, y (y = op(x)), n
// elements (UnaryBackwardParams; SPEC_OP = op). One invocation per 4 elements.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3)
float grad(int op, float x, float y) {
  switch (op) {
    case U_RELU: return x > 0.0 ? 1.0 : 0.0;
    case U_GELU: {
      float t = sy_tanh(kGeluC * (x + 0.044715 * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case U_TANH: return 1.0 - y * y;
    case U_SIGMOID: return y * (1.0 - y);
    case U_EXP: return y;
    case U_LOG: return 1.0 / x;
    case U_SQRT: return 0.5 / y;
    case U_SQUARE: return 2.0 * x;
    case U_ABS: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
    case U_NONFINITE: return 0.0;
  }
  return 1.0;
}
void vec_item(Op p, uint k) {
  vec4 dy = V(1)[VO(1) + k], x = V(2)[VO(2) + k];
  if (p.op == U_RELU) {
    V(0)[VO(0) + k] = mix(vec4(0.0), dy, greaterThan(x, vec4(0.0)));
    return;
  }
  vec4 y = V(3)[VO(3) + k];
  V(0)[VO(0) + k] = dy * vec4(grad(p.op, x.x, y.x), grad(p.op, x.y, y.y), grad(p.op, x.z, y.z), grad(p.op, x.w, y.w));
}
void one_item(Op p, uint j) { F(0)[O(0) + j] = F(1)[O(1) + j] * grad(p.op, F(2)[O(2) + j], F(3)[O(3) + j]); }
void main() {
  Op p = load_op();
  uint n = uint(load_UnaryBackwardParams().n);
  ELEMENTWISE(p, n)
}
