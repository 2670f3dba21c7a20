// SPDX-License-Identifier: MIT
// cross_entropy_backward: dx = (softmax(x) - onehot(label)) * dloss / rows.
// args dx, x, labels (i32), dloss[1]; CrossEntropyBackwardParams.
// SY_ROW_GROUPS: one workgroup per row (grid-stride over rows), workgroup
// reductions for the row's max and sum; otherwise one invocation per row. A bad label sets the status word and writes NaN.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3) STATUS
#include "reduce.glsl"
#include "rows.glsl"
void main() {
  Op p = load_op();
  CrossEntropyBackwardParams q = load_CrossEntropyBackwardParams();
  uint rows = uint(q.rows), cols = uint(q.cols);
  uint t = gl_LocalInvocationID.x;
  // aux: the whole batch's rows, for a block of them (the backend's split
  // by maxStorageBufferRange); 0: these rows are the batch.
  float scale = F(3)[O(3)] / float(p.aux != 0u ? p.aux : rows);
  if (SY_ROW_GROUPS) {
    for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
      uint x0 = O(1) + r * cols, d0 = O(0) + r * cols;
      int lab = I(2)[O(2) + r];
      if (lab < 0 || uint(lab) >= cols) {  // uniform: the whole workgroup's row
        if (t == 0u) atomicOr(status[0], SY_STATUS_BAD_LABEL);
        for (uint c = t; c < cols; c += WG) I(0)[d0 + c] = SY_NAN_BITS;
        continue;
      }
      float m, s;
      wg_row_stats(x0, cols, m, s);
      float k = scale / s;
      for (uint c = t; c < cols; c += WG)
        F(0)[d0 + c] = exp(F(1)[x0 + c] - m) * k - (int(c) == lab ? scale : 0.0);
    }
    return;
  }
  FOR_ITEMS(r, rows) {
    uint x0 = O(1) + r * cols, d0 = O(0) + r * cols;
    int lab = I(2)[O(2) + r];
    if (lab < 0 || uint(lab) >= cols) {  // the row's gradient reads as NaN (see common.glsl)
      atomicOr(status[0], SY_STATUS_BAD_LABEL);
      for (uint c = 0u; c < cols; ++c) I(0)[d0 + c] = SY_NAN_BITS;
      continue;
    }
    float m, s;
    row_stats(x0, cols, m, s);
    float k = scale / s;
    for (uint c = 0u; c < cols; ++c)
      F(0)[d0 + c] = exp(F(1)[x0 + c] - m) * k - (int(c) == lab ? scale : 0.0);
  }
}
