// Philox4x32-10 (Salmon et al. 2011), bit-identical to the CPU backend's.
// Counter = (k lo, k hi, offset lo, offset hi), key = seed (i[1], i[2]);
// the 64-bit offset arrives split as i[3] (lo) and i[4] (hi).
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
uvec4 philox_at(Op p, uint k) {
  return philox(uvec4(k, 0u, uint(p.i[3]), uint(p.i[4])), uint(p.i[1]), uint(p.i[2]));
}
const float kTwoPow24 = 1.0 / 16777216.0;
