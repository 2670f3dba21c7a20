// arange: out[k] = f[0] + k*f[1]. i[0]=n, i[1]=dtype. One invocation per element.
#version 450
#include "common.glsl"
ARG_RW(0)
void main() {
  Op p = load_op();
  FOR_ITEMS(k, p.i[0]) {
    float v = p.f[0] + float(k) * p.f[1];
    if (SPEC_OP == 0) F(0)[O(0) + k] = v;
    else if (SPEC_OP == 1) I(0)[O(0) + k] = int(v);
    else STORE_U8(0, p.off[0] + k, int(v));
  }
}
