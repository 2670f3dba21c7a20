// SPDX-License-Identifier: MIT
// softmax_backward: args dx, dy, y (y = forward output). softmax:
// dx = y * (dy - sum(dy*y)); log_softmax (SPEC_OP = `log` = 1): dx = dy -
// exp(y) * sum(dy). SoftmaxBackwardParams. SY_ROW_GROUPS: one workgroup per
// row; otherwise one invocation per row.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2)
#include "reduce.glsl"
void main() {
  Op p = load_op();
  SoftmaxBackwardParams q = load_SoftmaxBackwardParams();
  uint rows = uint(q.rows), cols = uint(q.cols);
  uint t = gl_LocalInvocationID.x;
  if (!SY_ROW_GROUPS) {  // short rows: one invocation each, no barriers
    FOR_ITEMS(r, rows) {
      uint b = r * cols;
      float s = 0.0;
      for (uint c = 0u; c < cols; ++c)
        s += p.op == 0 ? F(1)[O(1) + b + c] * F(2)[O(2) + b + c] : F(1)[O(1) + b + c];
      for (uint c = 0u; c < cols; ++c) {
        float g = F(1)[O(1) + b + c], y = F(2)[O(2) + b + c];
        F(0)[O(0) + b + c] = p.op == 0 ? y * (g - s) : g - exp(y) * s;
      }
    }
    return;
  }
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
    uint b = r * cols;
    float s = 0.0;
    for (uint c = t; c < cols; c += WG)
      s += p.op == 0 ? F(1)[O(1) + b + c] * F(2)[O(2) + b + c] : F(1)[O(1) + b + c];
    s = wg_sum(s);
    for (uint c = t; c < cols; c += WG) {
      float g = F(1)[O(1) + b + c], y = F(2)[O(2) + b + c];
      F(0)[O(0) + b + c] = p.op == 0 ? y * (g - s) : g - exp(y) * s;
    }
  }
}
