// SPDX-License-Identifier: MIT
// channel_affine: y = (a - k0[c]) * k1[c] + k2[c], plus (b - k3[c]) * k4[c]
// when has_b, k_r being the rows of coef, over (outer, C, inner) tensors
// (ChannelAffineParams): batch norm's normalization and its input gradient,
// centered so that a large mean cancels nothing.
// Dispatch: y over the outer * C rows (grid-stride), x over a row's inner
// elements (vec4s when aligned), so no invocation divides to find its
// channel but once per row.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3)
void main() {
  Op p = load_op();
  ChannelAffineParams q = load_ChannelAffineParams();
  uint C = uint(q.channels), E = uint(q.inner), rows = uint(q.outer) * C;
  // vec4s when rows are whole vec4s and every argument is 16-byte aligned.
  bool vec = ALIGNED4 && E % 4u == 0u;
  uint step = gl_NumWorkGroups.x * WG;
  for (uint r = gl_WorkGroupID.y; r < rows; r += gl_NumWorkGroups.y) {
    uint c = r % C;
    float k0 = F(3)[O(3) + c], k1 = F(3)[O(3) + C + c], k2 = F(3)[O(3) + 2u * C + c];
    float k3 = q.has_b ? F(3)[O(3) + 3u * C + c] : 0.0;
    float k4 = q.has_b ? F(3)[O(3) + 4u * C + c] : 0.0;
    if (vec) {
      for (uint i = gl_GlobalInvocationID.x; i < E / 4u; i += step) {
        uint k = r * (E / 4u) + i;
        vec4 v = (V(1)[VO(1) + k] - k0) * k1 + k2;
        if (q.has_b) v += (V(2)[VO(2) + k] - k3) * k4;
        V(0)[VO(0) + k] = v;
      }
      continue;
    }
    for (uint i = gl_GlobalInvocationID.x; i < E; i += step) {
      uint k = r * E + i;
      float v = (F(1)[O(1) + k] - k0) * k1 + k2;
      if (q.has_b) v += (F(2)[O(2) + k] - k3) * k4;
      F(0)[O(0) + k] = v;
    }
  }
}
