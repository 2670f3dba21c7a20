// affine: out = f[0]*in + f[1]. i[0]=n. One invocation per 4 elements.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void vec_item(Op p, uint k) { V(0)[VO(0) + k] = p.f[0] * V(1)[VO(1) + k] + p.f[1]; }
void one_item(Op p, uint j) { F(0)[O(0) + j] = p.f[0] * F(1)[O(1) + j] + p.f[1]; }
void main() {
  Op p = load_op();
  ELEMENTWISE(p, uint(p.i[0]))
}
