// SPDX-License-Identifier: MIT
// embedding: out[i, d] = weight[idx[i], d] (EmbeddingParams). args out,
// weight, idx (i32). One invocation per output element; an index outside
// [0, num) sets the status word and writes NaN.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) STATUS
void main() {
  Op p = load_op();
  EmbeddingParams q = load_EmbeddingParams();
  uint D = uint(q.dim);
  FOR_ITEMS(k, uint(q.n) * D) {
    uint i = k / D;
    int v = I(2)[O(2) + i];
    bool bad = v < 0 || v >= q.num;
    if (bad) atomicOr(status[0], SY_STATUS_BAD_INDEX);
    if (bad) I(0)[O(0) + k] = SY_NAN_BITS;  // NaN's bits (see common.glsl)
    else F(0)[O(0) + k] = F(1)[O(1) + uint(v) * D + k % D];
  }
}
