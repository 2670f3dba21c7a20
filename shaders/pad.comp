// pad: out = zeros(i[2]) with out[i[0] .. i[0]+i[1]) = in (f32). One
// invocation per output element.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  uint lo = uint(p.i[0]), len = uint(p.i[1]);
  FOR_ITEMS(k, p.i[2]) F(0)[O(0) + k] = (k >= lo && k < lo + len) ? F(1)[O(1) + k - lo] : 0.0;
}
