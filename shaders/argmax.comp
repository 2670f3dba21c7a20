// SPDX-License-Identifier: MIT
// argmax: out[r] = index of the first maximum of row r (i32); ArgmaxParams.
// One invocation per row.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  ArgmaxParams q = load_ArgmaxParams();
  uint cols = uint(q.cols);
  FOR_ITEMS(r, q.rows) {
    uint x0 = O(1) + r * cols;
    float best = cols > 0u ? F(1)[x0] : 0.0;
    int arg = 0;
    for (uint c = 1u; c < cols; ++c) {
      float v = F(1)[x0 + c];
      if (v > best) { best = v; arg = int(c); }
    }
    I(0)[O(0) + r] = arg;
  }
}
