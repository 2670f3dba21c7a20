// SPDX-License-Identifier: MIT
// arange: out[k] = start + k*step, n elements of dtype (ArangeParams;
// SPEC_OP = dtype). One invocation per element, or per 32-bit word for a
// 16-bit dtype.
#version 450
#include "common.glsl"
ARG_RW(0)
ArangeParams q;
float value(uint k) {
  precise float v = q.start + float(k) * q.step;  // no FMA: the CPU's values bit for bit
  return v;
}
void main() {
  Op p = load_op();
  q = load_ArangeParams();
  if (SPEC_OP >= DT_BF16) {
    uint n = uint(q.n), h0 = p.off[0] >> 1;
    FOR_ITEMS(i, half_words(h0, n)) {
      uint w = (h0 >> 1) + i;
      int j = int(2u * w) - int(h0);
      bool has_lo = HALF_IN(j, n), has_hi = HALF_IN(j + 1, n);
      uint lo = has_lo ? f32_to_half(SPEC_OP, value(uint(j))) : 0u;
      uint hi = has_hi ? f32_to_half(SPEC_OP, value(uint(j + 1))) : 0u;
      STORE_U16_PAIR(0, w, lo, hi, has_lo, has_hi)
    }
    return;
  }
  FOR_ITEMS(k, q.n) {
    float v = value(k);
    if (SPEC_OP == 0) F(0)[O(0) + k] = v;
    else if (SPEC_OP == 1) I(0)[O(0) + k] = int(v);
    else if (SPEC_OP == 2) STORE_U8(0, p.off[0] + k, int(v))
    else { ivec2 w = i64_from_float(v); I(0)[O(0) + 2u * k] = w.x; I(0)[O(0) + 2u * k + 1u] = w.y; }
  }
}
