// SPDX-License-Identifier: MIT
// Shared by the Adam kernels (adam_update.comp, adam_multi.comp).
// b^t for the integral step count by repeated squaring: a few ulp, where
// pow() (exp2(t*log2(b))) loses digits that 1 - b^t then magnifies.
float powi(float b, float t) {
  if (t != floor(t) || t < 0.0 || t > 16777216.0) return pow(b, t);
  float r = 1.0;
  for (uint e = uint(t); e != 0u; e >>= 1u) {
    if ((e & 1u) != 0u) r *= b;
    b *= b;
  }
  return r;
}
