// SPDX-License-Identifier: MIT
// cast: out = in converted from dtype `from` to `to` (0 f32, 1 i32, 2 u8,
// 3 i64), n elements (CastParams; SPEC_OP = from*4 + to). One invocation per
// element. Conversions as common.glsl's i64 helpers state.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  const int from = SPEC_OP / 4, to = SPEC_OP % 4;
  int n = load_CastParams().n;
  FOR_ITEMS(k, n) {
    float fv = 0.0;
    int iv = 0;
    ivec2 lv = ivec2(0);
    if (from == 0) { fv = F(1)[O(1) + k]; iv = int(fv); lv = i64_from_float(fv); }
    else if (from == 1) { iv = I(1)[O(1) + k]; fv = float(iv); lv = ivec2(iv, iv >> 31); }
    else if (from == 2) { iv = int(LOAD_U8(1, p.off[1] + k)); fv = float(iv); lv = ivec2(iv, 0); }
    else { lv = ivec2(I(1)[O(1) + 2u * k], I(1)[O(1) + 2u * k + 1u]); fv = i64_to_float(lv); iv = i64_to_i32(lv); }
    if (to == 0) F(0)[O(0) + k] = fv;
    else if (to == 1) I(0)[O(0) + k] = iv;
    else if (to == 2) STORE_U8(0, p.off[0] + k, lv.x)
    else { I(0)[O(0) + 2u * k] = lv.x; I(0)[O(0) + 2u * k + 1u] = lv.y; }
  }
}
