// SPDX-License-Identifier: MIT
// cross_entropy: loss[0] = mean_r (logsumexp(x_r) - x_r[label_r]). args loss,
// x, labels (i32); CrossEntropyParams. One workgroup: each invocation takes
// rows t, t+WG, ..., then a workgroup sum. A label outside [0, cols) sets the
// status word's bad-label bit and makes the loss NaN.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) STATUS
#include "reduce.glsl"
void main() {
  Op p = load_op();
  CrossEntropyParams q = load_CrossEntropyParams();
  uint rows = uint(q.rows), cols = uint(q.cols);
  float total = 0.0, bad = 0.0;
  for (uint r = gl_LocalInvocationID.x; r < rows; r += WG) {
    uint x0 = O(1) + r * cols;
    int lab = I(2)[O(2) + r];
    if (lab < 0 || uint(lab) >= cols) {
      atomicOr(status[0], SY_STATUS_BAD_LABEL);
      bad = 1.0;
      continue;
    }
    float m = SY_FLT_LOWEST;
    for (uint c = 0u; c < cols; ++c) m = max(m, F(1)[x0 + c]);
    float s = 0.0;
    for (uint c = 0u; c < cols; ++c) s += exp(F(1)[x0 + c] - m);
    total += m + log(s) - F(1)[x0 + uint(lab)];
  }
  total = wg_sum(total);
  bad = wg_max(bad);
  if (gl_LocalInvocationID.x == 0u) {
    if (bad > 0.0) I(0)[O(0)] = SY_NAN_BITS;  // NaN's bits (see common.glsl)
    else F(0)[O(0)] = total / float(rows);
  }
}
