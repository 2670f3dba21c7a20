// unary: out = op(in), op = Unary code. i[0]=n. One invocation per 4 elements.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  uint n = uint(p.i[0]);
  FOR_ITEMS(k, (n + 3u) / 4u) {
    uint e = 4u * k;
    if (ALIGNED4 && e + 4u <= n) { V(0)[VO(0) + k] = unary_apply4(p.op, V(1)[VO(1) + k]); continue; }
    for (uint j = e; j < min(e + 4u, n); ++j) F(0)[O(0) + j] = unary_apply(p.op, F(1)[O(1) + j]);
  }
}
