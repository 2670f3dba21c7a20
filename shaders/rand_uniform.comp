// SPDX-License-Identifier: MIT
// rand_uniform: out = uniform in [low, high) from Philox, n elements
// (RandUniformParams). One invocation per element.
#version 450
#include "common.glsl"
ARG_RW(0)
#include "philox.glsl"
void main() {
  Op p = load_op();
  RandUniformParams q = load_RandUniformParams();
  float span = q.high - q.low;
  FOR_ITEMS(k, q.n) F(0)[O(0) + k] = q.low + span * float(philox_at(q.seed, q.offset, k).x >> 8) * kTwoPow24;
}
