// SPDX-License-Identifier: MIT
// fill: out = value, n elements of dtype (0 f32, 1 i32, 2 u8, 3 i64, 4 bf16,
// 5 f16); FillParams. One invocation per 4 elements (vec4 stores when
// aligned), or per 32-bit word for a 16-bit dtype.
#version 450
#include "common.glsl"
ARG_RW(0)
// SPEC_OP = dtype; ALIGNED4 is only set for f32.
FillParams q;
void vec_item(Op p, uint k) { V(0)[VO(0) + k] = vec4(q.value); }
void one_item(Op p, uint j) {
  if (SPEC_OP == 0) F(0)[O(0) + j] = q.value;
  else if (SPEC_OP == 1) I(0)[O(0) + j] = int(q.value);
  else if (SPEC_OP == 2) STORE_U8(0, p.off[0] + j, int(q.value))
  else { ivec2 w = i64_from_float(q.value); I(0)[O(0) + 2u * j] = w.x; I(0)[O(0) + 2u * j + 1u] = w.y; }
}
void main() {
  Op p = load_op();
  q = load_FillParams();
  if (SPEC_OP >= DT_BF16) {
    uint n = uint(q.n), h0 = p.off[0] >> 1, v = f32_to_half(SPEC_OP, q.value);
    FOR_ITEMS(i, half_words(h0, n)) {
      uint w = (h0 >> 1) + i;
      int j = int(2u * w) - int(h0);
      STORE_U16_PAIR(0, w, v, v, HALF_IN(j, n), HALF_IN(j + 1, n))
    }
    return;
  }
  ELEMENTWISE(p, uint(q.n))
}
