// expand: out[o, l, i] = f[0] * in[o, i]. i[0]=outer i[1]=len i[2]=inner.
// One invocation per output element.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  uint len = uint(p.i[1]), inner = uint(p.i[2]);
  FOR_ITEMS(k, uint(p.i[0]) * len * inner) {
    uint i = k % inner, o = k / (len * inner);
    F(0)[O(0) + k] = p.f[0] * F(1)[O(1) + o * inner + i];
  }
}
