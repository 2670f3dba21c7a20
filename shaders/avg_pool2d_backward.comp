// SPDX-License-Identifier: MIT
// avg_pool2d_backward: dx[pl, h, w] = the sum over the windows covering (h, w)
// of dy over that window's divisor (AvgPool2dBackwardParams). args dx, dy.
// One invocation per dx element, gathering in a fixed order.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
#include "pool.glsl"
void main() {
  Op p = load_op();
  AvgPool2dBackwardParams q = load_AvgPool2dBackwardParams();
  int H = q.height, W = q.width, OH = q.out_h, OW = q.out_w;
  FOR_ITEMS(k, uint(q.planes * H * W)) {
    int w = int(k % uint(W)), h = int(k / uint(W) % uint(H));
    uint pl = k / uint(W * H);
    int th = h + q.padding[0], tw = w + q.padding[1];
    int oh0 = th - q.kernel[0] < 0 ? 0 : (th - q.kernel[0]) / q.stride[0] + 1;
    int ow0 = tw - q.kernel[1] < 0 ? 0 : (tw - q.kernel[1]) / q.stride[1] + 1;
    int oh1 = min(th / q.stride[0] + 1, OH), ow1 = min(tw / q.stride[1] + 1, OW);
    float s = 0.0;
    uint base = O(1) + pl * uint(OH * OW);
    for (int oh = oh0; oh < oh1; ++oh)
      for (int ow = ow0; ow < ow1; ++ow)
        s += F(1)[base + uint(oh * OW + ow)] /
             pool_divisor(q.kernel[0], q.kernel[1], q.stride[0], q.stride[1], q.padding[0],
                          q.padding[1], H, W, q.count_include_pad, oh, ow);
    F(0)[O(0) + k] = s;
  }
}
