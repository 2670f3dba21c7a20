// SPDX-License-Identifier: MIT
// transpose: out[c, r] = in[r, c] for in of R rows and C cols of elem_size
// bytes (8, 4, 2 for bf16/f16, or 1 for u8; SPEC_OP = elem_size);
// TransposeParams.
// Flag bit 1 (4- and 8-byte elements, R and C both at least 32): 32 x 32
// tiles through shared memory, one workgroup per tile (grid-stride over
// tiles): the tile is read along its rows and written along its columns,
// so both sides touch consecutive addresses (the padded row of 33 keeps the
// column reads off a single shared-memory bank). Otherwise one invocation
// per output element, consecutive invocations writing consecutive outputs.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
const uint T = 32u;
shared uint tile_lo[T][T + 1u];
shared uint tile_hi[T][T + 1u];  // 8-byte elements only
void main() {
  Op p = load_op();
  TransposeParams q = load_TransposeParams();
  uint R = uint(q.rows), C = uint(q.cols);
  if ((SPEC_FLAGS & 2u) != 0u) {
    uint tx = gl_LocalInvocationID.x % T, ty = gl_LocalInvocationID.x / T, step = WG / T;
    uint tiles_c = (C + T - 1u) / T, tiles = (R + T - 1u) / T * tiles_c;
    for (uint k = gl_WorkGroupID.x; k < tiles; k += gl_NumWorkGroups.x) {
      uint r0 = k / tiles_c * T, c0 = k % tiles_c * T;
      for (uint y = ty; y < T; y += step) {
        uint r = r0 + y, c = c0 + tx;
        if (r < R && c < C) {
          uint src = r * C + c;
          if (SPEC_OP == 8) {
            tile_lo[y][tx] = U(1)[O(1) + 2u * src];
            tile_hi[y][tx] = U(1)[O(1) + 2u * src + 1u];
          } else {
            tile_lo[y][tx] = U(1)[O(1) + src];
          }
        }
      }
      barrier();
      for (uint y = ty; y < T; y += step) {
        uint c = c0 + y, r = r0 + tx;  // out[c, r] = the tile's (r - r0, c - c0)
        if (r < R && c < C) {
          uint dst = c * R + r;
          if (SPEC_OP == 8) {
            U(0)[O(0) + 2u * dst] = tile_lo[tx][y];
            U(0)[O(0) + 2u * dst + 1u] = tile_hi[tx][y];
          } else {
            U(0)[O(0) + dst] = tile_lo[tx][y];
          }
        }
      }
      barrier();  // the tile is rewritten for the next one
    }
    return;
  }
  if (SPEC_OP == 2) {  // a word of the output (two elements) per invocation
    uint h0 = p.off[0] >> 1, h1 = p.off[1] >> 1;
    FOR_ITEMS(i, half_words(h0, R * C)) {
      uint w = (h0 >> 1) + i;
      int j = int(2u * w) - int(h0);
      bool has_lo = HALF_IN(j, R * C), has_hi = HALF_IN(j + 1, R * C);
      uint lo = has_lo ? LOAD_U16(1, h1 + uint(j) % R * C + uint(j) / R) : 0u;
      uint hi = has_hi ? LOAD_U16(1, h1 + uint(j + 1) % R * C + uint(j + 1) / R) : 0u;
      STORE_U16_PAIR(0, w, lo, hi, has_lo, has_hi)
    }
    return;
  }
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
