// SPDX-License-Identifier: MIT
// channel_stats: out[c] = mean, out[C + c] = biased variance of channel c of x
// (outer, C, inner) (ChannelStatsParams): batch norm's statistics. One
// workgroup per channel (grid-stride over channels); the mean first, then
// the squared deviations from it, each a workgroup reduction. Elements are
// found by reciprocals (common.glsl qdiv).
#version 450
#define SY_QDIV
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
#include "reduce.glsl"
void main() {
  Op p = load_op();
  ChannelStatsParams q = load_ChannelStatsParams();
  uint C = uint(q.channels), E = uint(q.inner), count = uint(q.outer) * E;
  float invE = 1.0 / float(E);
  for (uint c = gl_WorkGroupID.x; c < C; c += gl_NumWorkGroups.x) {
    float s = 0.0;
    for (uint k = gl_LocalInvocationID.x; k < count; k += WG) {
      uint o = qdiv(k, E, invE);
      s += F(1)[O(1) + (o * C + c) * E + (k - o * E)];
    }
    float mean = count > 0u ? wg_sum(s) / float(count) : 0.0;
    float v = 0.0;
    for (uint k = gl_LocalInvocationID.x; k < count; k += WG) {
      uint o = qdiv(k, E, invE);
      float d = F(1)[O(1) + (o * C + c) * E + (k - o * E)] - mean;
      v += d * d;
    }
    float var = count > 0u ? wg_sum(v) / float(count) : 0.0;
    if (gl_LocalInvocationID.x == 0u) {
      F(0)[O(0) + c] = mean;
      F(0)[O(0) + C + c] = var;
    }
  }
}
