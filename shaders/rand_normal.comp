// rand_normal: out = f[0] + f[1] * N(0,1), Box-Muller on Philox. i[0]=n. One
// invocation per element.
#version 450
#include "common.glsl"
ARG_RW(0)
#include "philox.glsl"
void main() {
  Op p = load_op();
  FOR_ITEMS(k, p.i[0]) {
    uvec4 r = philox_at(p, k);
    float u1 = float((r.x >> 8) + 1u) * kTwoPow24;  // (0, 1]
    float u2 = float(r.y >> 8) * kTwoPow24;
    F(0)[O(0) + k] = p.f[0] + p.f[1] * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  }
}
