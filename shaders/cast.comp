// cast: out = in converted from dtype `from` to `to` (0 f32, 1 i32, 2 u8),
// n elements (CastParams; SPEC_OP = from*4 + to). One invocation per element.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  const int from = SPEC_OP / 4, to = SPEC_OP % 4;
  int n = load_CastParams().n;
  FOR_ITEMS(k, n) {
    float fv = 0.0;
    int iv = 0;
    if (from == 0) { fv = F(1)[O(1) + k]; iv = int(fv); }
    else if (from == 1) { iv = I(1)[O(1) + k]; fv = float(iv); }
    else { iv = int(LOAD_U8(1, p.off[1] + k)); fv = float(iv); }
    if (to == 0) F(0)[O(0) + k] = fv;
    else if (to == 1) I(0)[O(0) + k] = iv;
    else STORE_U8(0, p.off[0] + k, iv);
  }
}
