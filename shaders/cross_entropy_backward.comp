// SPDX-License-Identifier: MIT
// cross_entropy_backward: dx = (softmax(x) - onehot(label)) * dloss / rows.
// args dx, x, labels (i32), dloss[1]; CrossEntropyBackwardParams. One invocation per
// row. A bad label sets the status word and writes NaN.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3) STATUS
void main() {
  Op p = load_op();
  CrossEntropyBackwardParams q = load_CrossEntropyBackwardParams();
  uint rows = uint(q.rows), cols = uint(q.cols);
  float scale = F(3)[O(3)] / float(rows);
  FOR_ITEMS(r, rows) {
    uint x0 = O(1) + r * cols, d0 = O(0) + r * cols;
    int lab = I(2)[O(2) + r];
    bool bad = lab < 0 || uint(lab) >= cols;
    if (bad) atomicOr(status[0], SY_STATUS_BAD_LABEL);
    if (bad) {  // the row's gradient reads as NaN (bit pattern: see common.glsl)
      for (uint c = 0u; c < cols; ++c) I(0)[d0 + c] = SY_NAN_BITS;
      continue;
    }
    float m = SY_FLT_LOWEST;
    for (uint c = 0u; c < cols; ++c) m = max(m, F(1)[x0 + c]);
    float s = 0.0;
    for (uint c = 0u; c < cols; ++c) s += exp(F(1)[x0 + c] - m);
    float k = scale / s;
    for (uint c = 0u; c < cols; ++c)
      F(0)[d0 + c] = exp(F(1)[x0 + c] - m) * k - (int(c) == lab ? scale : 0.0);
  }
}
