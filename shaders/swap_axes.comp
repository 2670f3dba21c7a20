// SPDX-License-Identifier: MIT
// swap_axes: out[o, j, i, e] = in[o, i, j, e] for in of (outer, a, b, inner)
// 32-bit elements (SwapAxesParams): NCHW <-> CNHW around a convolution's GEMM,
// and attention's head split. Dispatch: y over the outer * b output rows
// (grid-stride), x over a row's a * inner elements, consecutive invocations
// writing consecutive outputs (one division per element, none when inner
// is 1).
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  SwapAxesParams q = load_SwapAxesParams();
  uint A = uint(q.a), B = uint(q.b), E = uint(q.inner), rows = uint(q.outer) * B;
  // vec4s when inner is whole vec4s and both arguments are 16-byte aligned.
  bool vec = ALIGNED4 && E % 4u == 0u;
  uint step = gl_NumWorkGroups.x * WG;
  for (uint r = gl_WorkGroupID.y; r < rows; r += gl_NumWorkGroups.y) {
    uint o = r / B, j = r - o * B;
    uint src_row = o * A * B + j;  // in[o, 0, j, 0] in units of E
    if (vec) {
      uint E4 = E / 4u;
      for (uint t = gl_GlobalInvocationID.x; t < A * E4; t += step) {
        uint i = t / E4, e = t - i * E4;
        V(0)[VO(0) + r * A * E4 + t] = V(1)[VO(1) + (src_row + i * B) * E4 + e];
      }
      continue;
    }
    for (uint t = gl_GlobalInvocationID.x; t < A * E; t += step) {
      uint i = E == 1u ? t : t / E, e = t - i * E;
      U(0)[O(0) + r * A * E + t] = U(1)[O(1) + (src_row + i * B) * E + e];
    }
  }
}
