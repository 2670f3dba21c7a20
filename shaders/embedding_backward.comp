// SPDX-License-Identifier: MIT
// embedding_backward: dw[v, d] = the sum over i with idx[i] == v of dy[i, d],
// added in the order of i (EmbeddingBackwardParams). args dw, dy, idx (i32).
// One invocation per (range of rows, d): it zeroes its rows, then reads every
// index and adds the rows of dy whose index falls in its range. No atomics:
// the result is the same on every run and every device.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2)
void main() {
  Op p = load_op();
  EmbeddingBackwardParams q = load_EmbeddingBackwardParams();
  uint D = uint(q.dim), N = uint(q.num), R = uint(q.ranges);
  uint per = (N + R - 1u) / R;
  FOR_ITEMS(k, R * D) {
    uint d = k % D, v0 = k / D * per, v1 = min(v0 + per, N);
    for (uint v = v0; v < v1; ++v) F(0)[O(0) + v * D + d] = 0.0;
    for (uint i = 0u; i < uint(q.n); ++i) {
      int v = I(2)[O(2) + i];
      if (v >= int(v0) && v < int(v1)) F(0)[O(0) + uint(v) * D + d] += F(1)[O(1) + i * D + d];
    }
  }
}
