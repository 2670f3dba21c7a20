// SPDX-License-Identifier: MIT
// Philox4x32-10 (Salmon et al. 2011), bit-identical to the CPU backend's.
// Counter = (k lo, k hi, offset lo, offset hi), key = (seed lo, seed hi);
// both 64-bit words arrive as uvec2(lo, hi).
uvec4 philox(uvec4 c, uint k0, uint k1) {
  for (int r = 0; r < 10; ++r) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
    c = uvec4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}
uvec4 philox_at(uvec2 seed, uvec2 offset, uint k) {
  return philox(uvec4(k, 0u, offset.x, offset.y), seed.x, seed.y);
}
const float kTwoPow24 = 1.0 / 16777216.0;
