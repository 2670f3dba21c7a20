// affine: out = f[0]*in + f[1]. i[0]=n. One invocation per 4 elements.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  uint n = uint(p.i[0]);
  float a = p.f[0], b = p.f[1];
  FOR_ITEMS(k, (n + 3u) / 4u) {
    uint e = 4u * k;
    if (ALIGNED4 && e + 4u <= n) { V(0)[VO(0) + k] = a * V(1)[VO(1) + k] + b; continue; }
    for (uint j = e; j < min(e + 4u, n); ++j) F(0)[O(0) + j] = a * F(1)[O(1) + j] + b;
  }
}
