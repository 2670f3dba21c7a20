// SPDX-License-Identifier: MIT
// transpose: out[c, r] = in[r, c] for in of R rows and C cols of elem_size
// bytes (8, 4, or 1 for u8; SPEC_OP = elem_size); TransposeParams. One invocation per output element;
// consecutive invocations write consecutive outputs.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  TransposeParams q = load_TransposeParams();
  uint R = uint(q.rows), C = uint(q.cols);
  FOR_ITEMS(k, R * C) {
    uint c = k / R, r = k % R;  // out is [C, R]
    uint src = r * C + c;
    if (SPEC_OP == 1) STORE_U8(0, p.off[0] + k, LOAD_U8(1, p.off[1] + src))
    else if (SPEC_OP == 8) {
      U(0)[O(0) + 2u * k] = U(1)[O(1) + 2u * src];
      U(0)[O(0) + 2u * k + 1u] = U(1)[O(1) + 2u * src + 1u];
    } else U(0)[O(0) + k] = U(1)[O(1) + src];
  }
}
