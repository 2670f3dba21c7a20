// SPDX-License-Identifier: MIT
// avg_pool2d: y[pl, oh, ow] = the window's sum over its divisor: the window
// clipped to the padded plane when count_include_pad (PyTorch's default),
// else its taps inside the plane (AvgPool2dParams). args y, x. One
// invocation per output element.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
#include "pool.glsl"
void main() {
  Op p = load_op();
  AvgPool2dParams q = load_AvgPool2dParams();
  int H = q.height, W = q.width, OH = q.out_h, OW = q.out_w;
  FOR_ITEMS(k, uint(q.planes * OH * OW)) {
    int ow = int(k % uint(OW)), oh = int(k / uint(OW) % uint(OH));
    uint pl = k / uint(OW * OH);
    int hs = oh * q.stride[0] - q.padding[0], ws = ow * q.stride[1] - q.padding[1];
    int h0 = max(hs, 0), h1 = min(hs + q.kernel[0], H);
    int w0 = max(ws, 0), w1 = min(ws + q.kernel[1], W);
    float s = 0.0;
    uint base = O(1) + pl * uint(H * W);
    for (int h = h0; h < h1; ++h)
      for (int w = w0; w < w1; ++w) s += F(1)[base + uint(h * W + w)];
    F(0)[O(0) + k] = s / pool_divisor(q.kernel[0], q.kernel[1], q.stride[0], q.stride[1],
                                      q.padding[0], q.padding[1], H, W, q.count_include_pad,
                                      oh, ow);
  }
}
