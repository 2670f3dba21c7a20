// SPDX-License-Identifier: MIT
// argmax: out[r] = index of the first maximum of row r (i32); ArgmaxParams.
// As the CPU's std::max_element: the first element is the candidate, a
// later one replaces it only if greater. So a row starting with NaN gives
// 0, and any other NaN is never chosen. Without SY_ROW_GROUPS: one invocation
// per row, scanning it in order. With it: one workgroup per row (grid-stride over rows); each invocation keeps the first maximum of
// its strided share, ignoring NaNs (found by their bits, which no float
// mode alters), and a shared-memory tree keeps the larger value, on a tie
// the smaller index: the first maximum of the row's numbers, which is what
// the scan gives when the row does not start with NaN.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
shared float best_v[WG];
shared uint best_i[WG];
const uint NONE = 0xffffffffu;  // no number seen: loses to any candidate
bool is_nan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }
void main() {
  Op p = load_op();
  ArgmaxParams q = load_ArgmaxParams();
  uint rows = uint(q.rows), cols = uint(q.cols);
  if (!SY_ROW_GROUPS) {
    FOR_ITEMS(r, rows) {
      uint x0 = O(1) + r * cols;
      float best = cols > 0u ? F(1)[x0] : 0.0;
      int arg = 0;
      for (uint c = 1u; c < cols; ++c) {
        float v = F(1)[x0 + c];
        if (v > best) { best = v; arg = int(c); }
      }
      I(0)[O(0) + r] = arg;
    }
    return;
  }
  uint t = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
    uint x0 = O(1) + r * cols;
    float bv = 0.0;
    uint bi = NONE;
    for (uint c = t; c < cols; c += WG) {
      float v = F(1)[x0 + c];
      if (!is_nan(v) && (bi == NONE || v > bv)) { bv = v; bi = c; }
    }
    best_v[t] = bv;
    best_i[t] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
      if (t < s) {
        float ov = best_v[t + s];
        uint oi = best_i[t + s];
        if (oi != NONE && (bi == NONE || ov > bv || (ov == bv && oi < bi))) {
          bv = ov;
          bi = oi;
          best_v[t] = bv;
          best_i[t] = bi;
        }
      }
      barrier();
    }
    if (t == 0u) I(0)[O(0) + r] = bi == NONE || is_nan(F(1)[x0]) ? 0 : int(bi);
    barrier();  // best_v/best_i are rewritten for the next row
  }
}
