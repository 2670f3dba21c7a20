// SPDX-License-Identifier: MIT
// channel_sums: out[c] = sum of a, out[C + c] = sum of a * (b - mean[c]) over
// channel c of (outer, C, inner) tensors (ChannelSumsParams): batch norm's
// backward. args out, a, b, mean, and with relu_mask r (a counts as 0 where
// r > 0 fails: a ReLU's backward, fused). One
// workgroup per channel (grid-stride over channels), workgroup reductions.
// The pooled form (pool > 0, kernels.h): a is a max pooling's gradient and r
// its packed output; the sums run over the windows, each adding its
// gradient (0 where relu_mask and its maximum > 0 fails) at its index.
// Elements are found by reciprocals (common.glsl qdiv).
#version 450
#define SY_QDIV
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3) ARG_RO(4)
#include "reduce.glsl"
void main() {
  Op p = load_op();
  ChannelSumsParams q = load_ChannelSumsParams();
  uint C = uint(q.channels), E = uint(q.inner), count = uint(q.outer) * E;
  // The pooled form: PE windows a plane, n in all (r's maxima, then indices).
  uint P = uint(q.pool), W = max(uint(q.width), 1u);
  uint PE = P > 0u ? (E / W / P) * (W / P) : 0u;
  uint n = uint(q.outer) * C * PE;
  float invE = 1.0 / float(E), invPE = 1.0 / float(max(PE, 1u));
  for (uint c = gl_WorkGroupID.x; c < C; c += gl_NumWorkGroups.x) {
    float s = 0.0, t = 0.0, m = F(3)[O(3) + c];
    if (P > 0u) {
      for (uint k = gl_LocalInvocationID.x; k < uint(q.outer) * PE; k += WG) {
        uint o = qdiv(k, PE, invPE), r = o * C + c, j = r * PE + (k - o * PE);
        float a = F(1)[O(1) + j];
        if (q.relu_mask && !(F(4)[O(4) + j] > 0.0)) a = 0.0;
        s += a;
        t += a * (F(2)[O(2) + r * E + uint(I(4)[O(4) + n + j])] - m);
      }
    }
    for (uint k = gl_LocalInvocationID.x; P == 0u && k < count; k += WG) {
      uint o = qdiv(k, E, invE), i = (o * C + c) * E + (k - o * E);
      float a = F(1)[O(1) + i];
      if (q.relu_mask && !(F(4)[O(4) + i] > 0.0)) a = 0.0;
      s += a;
      t += a * (F(2)[O(2) + i] - m);
    }
    s = wg_sum(s);
    t = wg_sum(t);
    if (gl_LocalInvocationID.x == 0u) {
      F(0)[O(0) + c] = s;
      F(0)[O(0) + C + c] = t;
    }
  }
}
