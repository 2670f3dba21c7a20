// fill: out = f[0]. i[0]=n elements of dtype i[1] (0 f32, 1 i32, 2 u8).
// One invocation per 4 elements (vec4 stores when aligned).
#version 450
#include "common.glsl"
ARG_RW(0)
void main() {
  Op p = load_op();
  uint n = uint(p.i[0]);
  int dt = p.i[1];
  FOR_ITEMS(k, (n + 3u) / 4u) {
    uint e = 4u * k;
    if (dt == 0 && ALIGNED4 && e + 4u <= n) {
      V(0)[VO(0) + k] = vec4(p.f[0]);
      continue;
    }
    for (uint j = e; j < min(e + 4u, n); ++j) {
      if (dt == 0) F(0)[O(0) + j] = p.f[0];
      else if (dt == 1) I(0)[O(0) + j] = int(p.f[0]);
      else STORE_U8(0, p.off[0] + j, int(p.f[0]));
    }
  }
}
