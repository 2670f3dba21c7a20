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
  // precise: no fused multiply-add, so the values are the CPU's bit for bit
  // (a driver may otherwise contract the multiply and the add).
  FOR_ITEMS(k, q.n) {
    precise float v = q.low + span * float(philox_at(q.seed, q.offset, k).x >> 8) * kTwoPow24;
    F(0)[O(0) + k] = v;
  }
}
