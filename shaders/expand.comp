// SPDX-License-Identifier: MIT
// expand: out[o, l, i] = scale * in[o, i] over (outer, len, inner)
// (ExpandParams). One invocation per output element.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  ExpandParams q = load_ExpandParams();
  uint len = uint(q.len), inner = uint(q.inner);
  FOR_ITEMS(k, uint(q.outer) * len * inner) {
    uint i = k % inner, o = k / (len * inner);
    F(0)[O(0) + k] = q.scale * F(1)[O(1) + o * inner + i];
  }
}
