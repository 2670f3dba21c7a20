// SPDX-License-Identifier: MIT
// Average pooling's divisor for output (oh, ow): the window clipped to the
// padded plane when count_include_pad, else to the plane itself.
float pool_divisor(int k0, int k1, int s0, int s1, int p0, int p1, int H, int W, bool include_pad,
                   int oh, int ow) {
  int hs = oh * s0 - p0, ws = ow * s1 - p1;
  if (include_pad) return float((min(hs + k0, H + p0) - hs) * (min(ws + k1, W + p1) - ws));
  return float((min(hs + k0, H) - max(hs, 0)) * (min(ws + k1, W) - max(ws, 0)));
}
