// SPDX-License-Identifier: MIT
// cross_entropy: loss[0] = mean_r (logsumexp(x_r) - x_r[label_r]). args loss,
// x, labels (i32); CrossEntropyParams. SY_ROW_GROUPS: one workgroup
// per row (grid-stride over rows), workgroup reductions for the row's max
// and sum; otherwise one invocation per row, then a workgroup sum. A grid of one workgroup writes the loss itself. A larger grid is two
// passes (vk_launch.cpp's plan_launches): kPartials, where workgroup w
// writes its rows' sum and whether it saw a bad label to scratch[2w] and
// [2w + 1] (binding 4); kFinish, one workgroup adding the aux partials in a
// fixed order. No atomics on floats: the loss is the same on every run. A
// label outside [0, cols) sets the status word's bad-label bit and makes
// the loss NaN.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RW(4) STATUS
#include "reduce.glsl"
#include "rows.glsl"
void main() {
  Op p = load_op();
  CrossEntropyParams q = load_CrossEntropyParams();
  uint rows = uint(q.rows), cols = uint(q.cols);
  uint t = gl_LocalInvocationID.x;
  float total = 0.0, bad = 0.0;
  if ((SPEC_FLAGS & SY_FINISH) != 0u) {
    for (uint k = t; k < p.aux; k += WG) {
      total += F(4)[O(4) + 2u * k];
      bad = max(bad, F(4)[O(4) + 2u * k + 1u]);
    }
    total = wg_sum(total);
    bad = wg_max(bad);
  } else if (SY_ROW_GROUPS) {
    // The row's label is the same for the whole workgroup, so a bad row's
    // `continue` is uniform and every invocation meets the same barriers.
    for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
      uint x0 = O(1) + r * cols;
      int lab = I(2)[O(2) + r];
      if (lab < 0 || uint(lab) >= cols) {
        if (t == 0u) atomicOr(status[0], SY_STATUS_BAD_LABEL);
        bad = 1.0;
        continue;
      }
      float m, s;
      wg_row_stats(x0, cols, m, s);
      total += m + log(s) - F(1)[x0 + uint(lab)];  // the same in every invocation
    }
  } else {
    FOR_ITEMS(r, rows) {
      uint x0 = O(1) + r * cols;
      int lab = I(2)[O(2) + r];
      if (lab < 0 || uint(lab) >= cols) {
        atomicOr(status[0], SY_STATUS_BAD_LABEL);
        bad = 1.0;
        continue;
      }
      float m, s;
      row_stats(x0, cols, m, s);
      total += m + log(s) - F(1)[x0 + uint(lab)];
    }
    total = wg_sum(total);
    bad = wg_max(bad);
  }
  if (t != 0u) return;
  if ((SPEC_FLAGS & SY_PARTIALS) != 0u) {
    F(4)[O(4) + 2u * gl_WorkGroupID.x] = total;
    F(4)[O(4) + 2u * gl_WorkGroupID.x + 1u] = bad;
  } else if (bad > 0.0) {
    I(0)[O(0)] = SY_NAN_BITS;  // NaN's bits (see common.glsl)
  } else {
    F(0)[O(0)] = total / float(rows);
  }
}
