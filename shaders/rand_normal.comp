// SPDX-License-Identifier: MIT
// rand_normal: out = mean + std * N(0,1), Box-Muller on Philox, n elements
// (RandNormalParams). One invocation per element.
#version 450
#include "common.glsl"
ARG_RW(0)
#include "philox.glsl"
void main() {
  Op p = load_op();
  RandNormalParams q = load_RandNormalParams();
  FOR_ITEMS(k, q.n) {
    uvec4 r = philox_at(q.seed, q.offset, k);
    float u1 = float((r.x >> 8) + 1u) * kTwoPow24;  // (0, 1]
    float u2 = float(r.y >> 8) * kTwoPow24;
    F(0)[O(0) + k] = q.mean + q.std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  }
}
