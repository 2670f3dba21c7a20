// SPDX-License-Identifier: MIT
// softmax, or log_softmax when `log` (SPEC_OP = 1), of each row;
// SoftmaxParams. SY_ROW_GROUPS: one workgroup per row (grid-stride over
// rows); max and sum are workgroup reductions. Otherwise one invocation per
// row (attention's rows of 16 spent 95 us each on a workgroup's barriers on
// lavapipe).
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
#include "reduce.glsl"
#include "rows.glsl"
void main() {
  Op p = load_op();
  SoftmaxParams q = load_SoftmaxParams();
  uint rows = uint(q.rows), cols = uint(q.cols);
  uint t = gl_LocalInvocationID.x;
  // flags bit 1: rows of whole, aligned vec4s (cols % 4 == 0): vec4 loads.
  bool v4 = (p.flags & 2u) != 0u;
  uint c4 = cols / 4u;
  if (!SY_ROW_GROUPS) {  // short rows: one invocation each, no barriers
    FOR_ITEMS(r, rows) {
      uint x0 = O(1) + r * cols, y0 = O(0) + r * cols;
      float m, s;
      row_stats(x0, cols, m, s);
      float lse = m + log(s), inv = 1.0 / s;
      for (uint c = 0u; c < cols; ++c) {
        float x = F(1)[x0 + c];
        F(0)[y0 + c] = p.op == 1 ? x - lse : exp(x - m) * inv;
      }
    }
    return;
  }
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
    uint x0 = O(1) + r * cols, y0 = O(0) + r * cols;
    float m = SY_FLT_LOWEST;
    if (v4) {
      vec4 mv = vec4(m);
      for (uint c = t; c < c4; c += WG) mv = max(mv, V(1)[x0 / 4u + c]);
      m = max(max(mv.x, mv.y), max(mv.z, mv.w));
    } else {
      for (uint c = t; c < cols; c += WG) m = max(m, F(1)[x0 + c]);
    }
    m = wg_max(m);
    float s = 0.0;
    if (v4) {
      vec4 sv = vec4(0.0);
      for (uint c = t; c < c4; c += WG) sv += exp(V(1)[x0 / 4u + c] - m);
      s = (sv.x + sv.y) + (sv.z + sv.w);
    } else {
      for (uint c = t; c < cols; c += WG) s += exp(F(1)[x0 + c] - m);
    }
    s = wg_sum(s);
    float lse = m + log(s), inv = 1.0 / s;
    if (v4) {
      for (uint c = t; c < c4; c += WG) {
        vec4 x = V(1)[x0 / 4u + c];
        V(0)[y0 / 4u + c] = p.op == 1 ? x - lse : exp(x - m) * inv;
      }
    } else {
      for (uint c = t; c < cols; c += WG) {
        float x = F(1)[x0 + c];
        F(0)[y0 + c] = p.op == 1 ? x - lse : exp(x - m) * inv;
      }
    }
  }
}
