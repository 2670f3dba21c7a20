// SPDX-License-Identifier: MIT
// arange: out[k] = start + k*step, n elements of dtype (ArangeParams;
// SPEC_OP = dtype). One invocation per element.
#version 450
#include "common.glsl"
ARG_RW(0)
void main() {
  Op p = load_op();
  ArangeParams q = load_ArangeParams();
  FOR_ITEMS(k, q.n) {
    precise float v = q.start + float(k) * q.step;  // no FMA: the CPU's values bit for bit
    if (SPEC_OP == 0) F(0)[O(0) + k] = v;
    else if (SPEC_OP == 1) I(0)[O(0) + k] = int(v);
    else if (SPEC_OP == 2) STORE_U8(0, p.off[0] + k, int(v))
    else { ivec2 w = i64_from_float(v); I(0)[O(0) + 2u * k] = w.x; I(0)[O(0) + 2u * k + 1u] = w.y; }
  }
}
