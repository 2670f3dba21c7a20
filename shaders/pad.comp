// SPDX-License-Identifier: MIT
// pad: out = zeros(total) with out[begin .. begin+len) = in (f32); PadParams.
// One invocation per output element.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  PadParams q = load_PadParams();
  uint lo = uint(q.begin), len = uint(q.len);
  FOR_ITEMS(k, q.total) F(0)[O(0) + k] = (k >= lo && k < lo + len) ? F(1)[O(1) + k - lo] : 0.0;
}
