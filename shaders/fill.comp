// fill: out = f[0]. i[0]=n elements of dtype i[1] (0 f32, 1 i32, 2 u8).
// One invocation per 4 elements (vec4 stores when aligned).
#version 450
#include "common.glsl"
ARG_RW(0)
// SPEC_OP = dtype; ALIGNED4 is only set for f32.
void vec_item(Op p, uint k) { V(0)[VO(0) + k] = vec4(p.f[0]); }
void one_item(Op p, uint j) {
  if (SPEC_OP == 0) F(0)[O(0) + j] = p.f[0];
  else if (SPEC_OP == 1) I(0)[O(0) + j] = int(p.f[0]);
  else STORE_U8(0, p.off[0] + j, int(p.f[0]));
}
void main() {
  Op p = load_op();
  ELEMENTWISE(p, uint(p.i[0]))
}
