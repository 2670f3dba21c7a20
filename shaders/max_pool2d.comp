// SPDX-License-Identifier: MIT
// max_pool2d: y[pl, oh, ow] = the maximum of the window (padding never
// wins, a NaN wins: the last one, as PyTorch), idx = its h * width + w in the
// plane, the first maximum in row-major order (MaxPool2dParams). args out, x: out holds the n maxima,
// then the n indices (i32). One invocation per output element. With affine
// (and relu), each value is first (v - k0[c]) * k1[c] + k2[c] (then
// max(v, 0)) for the rows of argument 2, c the plane's channel: batch norm
// and its ReLU fused into the pooling. Items are decoded by reciprocals
// (common.glsl qdiv).
#version 450
#define SY_QDIV
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2)
// An input value as the pooling sees it (the fused affine and ReLU).
float value(MaxPool2dParams q, float v, float k0, float k1, float k2) {
  if (!q.affine) return v;
  v = (v - k0) * k1 + k2;
  return q.relu ? (v > 0.0 ? v : 0.0) : v;
}
void main() {
  Op p = load_op();
  MaxPool2dParams q = load_MaxPool2dParams();
  int H = q.height, W = q.width, OH = q.out_h, OW = q.out_w;
  uint n = uint(q.planes * OH * OW);
  float invOW = 1.0 / float(OW), invOH = 1.0 / float(OH), invC = 1.0 / float(max(q.channels, 1));
  FOR_ITEMS(k, n) {
    uint r = qdiv(k, uint(OW), invOW), pl = qdiv(r, uint(OH), invOH);
    int ow = int(k - r * uint(OW)), oh = int(r - pl * uint(OH));
    int hs = oh * q.stride[0] - q.padding[0], ws = ow * q.stride[1] - q.padding[1];
    int h0 = max(hs, 0), h1 = min(hs + q.kernel[0], H);
    int w0 = max(ws, 0), w1 = min(ws + q.kernel[1], W);
    // The window's first element starts the search (no -inf sentinel: see
    // common.glsl); a window of padding only (never, as padding is at most
    // half the kernel) would keep the lowest finite float.
    uint base = O(1) + pl * uint(H * W);
    float k0 = 0.0, k1 = 1.0, k2 = 0.0;
    if (q.affine) {
      uint C = uint(q.channels), c = pl - qdiv(pl, C, invC) * C;
      k0 = F(2)[O(2) + c], k1 = F(2)[O(2) + C + c], k2 = F(2)[O(2) + 2u * C + c];
    }
    int at = h0 * W + w0;
    float best = h0 < h1 && w0 < w1 ? value(q, F(1)[base + uint(at)], k0, k1, k2) : SY_FLT_LOWEST;
    for (int h = h0; h < h1; ++h)
      for (int w = w0; w < w1; ++w) {
        float v = value(q, F(1)[base + uint(h * W + w)], k0, k1, k2);
        if (v > best || isnan(v)) {  // once best is NaN only a later NaN replaces it
          best = v;
          at = h * W + w;
        }
      }
    F(0)[O(0) + k] = best;
    I(0)[O(0) + n + k] = at;
  }
}
