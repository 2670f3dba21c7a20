// SPDX-License-Identifier: MIT
// reduce_sum: out[o, i] = scale * sum_l in[o, l, i] over (outer, len, inner)
// (ReduceSumParams). inner == 1 and rows longer than SY_SHORT_ROW: one workgroup
// per row (grid-stride over rows), a workgroup reduction. Otherwise one
// invocation per output (o, i), summing down the column (consecutive
// invocations read consecutive addresses).
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
#include "reduce.glsl"
void main() {
  Op p = load_op();
  ReduceSumParams q = load_ReduceSumParams();
  uint outer = uint(q.outer), len = uint(q.len), inner = uint(q.inner);
  if (inner == 1u && len > SY_SHORT_ROW) {
    for (uint r = gl_WorkGroupID.x; r < outer; r += gl_NumWorkGroups.x) {
      float s = 0.0;
      uint base = O(1) + r * len;
      if ((p.flags & 2u) != 0u) {  // rows of whole, aligned vec4s
        vec4 sv = vec4(0.0);
        for (uint l = gl_LocalInvocationID.x; l < len / 4u; l += WG) sv += V(1)[base / 4u + l];
        s = (sv.x + sv.y) + (sv.z + sv.w);
      } else {
        for (uint l = gl_LocalInvocationID.x; l < len; l += WG) s += F(1)[base + l];
      }
      s = wg_sum(s);
      if (gl_LocalInvocationID.x == 0u) F(0)[O(0) + r] = s * q.scale;
    }
    return;
  }
  FOR_ITEMS(k, outer * inner) {
    uint o = k / inner, i = k % inner;
    uint base = O(1) + o * len * inner + i;
    float s = 0.0, c = 0.0;  // Kahan: long columns (batch sums) keep their precision
    for (uint l = 0u; l < len; ++l) {
      float y = F(1)[base + l * inner] - c;
      float t = s + y;
      c = (t - s) - y;
      s = t;
    }
    F(0)[O(0) + k] = s * q.scale;
  }
}
