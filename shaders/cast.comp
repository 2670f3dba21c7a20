// SPDX-License-Identifier: MIT
// cast: out = in converted from dtype `from` to `to` (0 f32, 1 i32, 2 u8,
// 3 i64, 4 bf16, 5 f16), n elements (CastParams; SPEC_OP = from*8 + to).
// One invocation per element, or per 32-bit word of the output for a 16-bit
// one. Conversions as common.glsl's i64 and 16-bit helpers state (a 16-bit
// float converts through f32, as on the CPU).
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
const int from = SPEC_OP / 8, to = SPEC_OP % 8;
// Element k of the input as f32, i32 and i64 (words).
void load(Op p, uint k, out float fv, out int iv, out ivec2 lv) {
  if (from == 0) { fv = F(1)[O(1) + k]; iv = int(fv); lv = i64_from_float(fv); }
  else if (from == 1) { iv = I(1)[O(1) + k]; fv = float(iv); lv = ivec2(iv, iv >> 31); }
  else if (from == 2) { iv = int(LOAD_U8(1, p.off[1] + k)); fv = float(iv); lv = ivec2(iv, 0); }
  else if (from == 3) { lv = ivec2(I(1)[O(1) + 2u * k], I(1)[O(1) + 2u * k + 1u]); fv = i64_to_float(lv); iv = i64_to_i32(lv); }
  else { fv = half_to_f32(from, LOAD_U16(1, (p.off[1] >> 1) + k)); iv = int(fv); lv = i64_from_float(fv); }
}
uint load_half(Op p, uint k) {
  if (from == 0) return f32_bits_to_half(to, U(1)[O(1) + k]);  // bits to bits
  if (from >= DT_BF16) return f32_bits_to_half(to, half_to_f32_bits(from, LOAD_U16(1, (p.off[1] >> 1) + k)));
  float fv;
  int iv;
  ivec2 lv;
  load(p, k, fv, iv, lv);
  return f32_to_half(to, fv);
}
void main() {
  Op p = load_op();
  uint n = uint(load_CastParams().n);
  if (to >= DT_BF16) {
    uint h0 = p.off[0] >> 1;
    FOR_ITEMS(i, half_words(h0, n)) {
      uint w = (h0 >> 1) + i;
      int j = int(2u * w) - int(h0);
      bool has_lo = HALF_IN(j, n), has_hi = HALF_IN(j + 1, n);
      uint lo = has_lo ? load_half(p, uint(j)) : 0u, hi = has_hi ? load_half(p, uint(j + 1)) : 0u;
      STORE_U16_PAIR(0, w, lo, hi, has_lo, has_hi)
    }
    return;
  }
  FOR_ITEMS(k, n) {
    float fv = 0.0;
    int iv = 0;
    ivec2 lv = ivec2(0);
    if (from >= DT_BF16 && to == 0) {  // widening: bits to bits (infinities, NaN as they are)
      U(0)[O(0) + k] = half_to_f32_bits(from, LOAD_U16(1, (p.off[1] >> 1) + k));
      continue;
    }
    load(p, k, fv, iv, lv);
    if (to == 0) F(0)[O(0) + k] = fv;
    else if (to == 1) I(0)[O(0) + k] = iv;
    else if (to == 2) STORE_U8(0, p.off[0] + k, lv.x)
    else { I(0)[O(0) + 2u * k] = lv.x; I(0)[O(0) + 2u * k + 1u] = lv.y; }
  }
}
