// transpose: out[c, r] = in[r, c]. i[0]=rows R of in, i[1]=cols C of in,
// i[2]=element size (4, or 1 for u8). One invocation per output element;
// consecutive invocations write consecutive outputs.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  uint R = uint(p.i[0]), C = uint(p.i[1]);
  FOR_ITEMS(k, R * C) {
    uint c = k / R, r = k % R;  // out is [C, R]
    uint src = r * C + c;
    if (SPEC_OP == 1) STORE_U8(0, p.off[0] + k, LOAD_U8(1, p.off[1] + src))
    else U(0)[O(0) + k] = U(1)[O(1) + src];
  }
}
