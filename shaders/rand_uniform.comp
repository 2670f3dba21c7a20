// rand_uniform: out = uniform in [f[0], f[1]) from Philox. i[0]=n. One
// invocation per element.
#version 450
#include "common.glsl"
ARG_RW(0)
#include "philox.glsl"
void main() {
  Op p = load_op();
  float span = p.f[1] - p.f[0];
  FOR_ITEMS(k, p.i[0]) F(0)[O(0) + k] = p.f[0] + span * float(philox_at(p, k).x >> 8) * kTwoPow24;
}
