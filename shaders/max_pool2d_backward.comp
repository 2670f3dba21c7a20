// SPDX-License-Identifier: MIT
// max_pool2d_backward: dx[pl, h, w] = the sum of dy over the windows whose
// idx is (h, w) (MaxPool2dBackwardParams). args dx, dy, idx (i32).
// Dispatch: y over the planes (grid-stride), x over a plane's elements; each
// invocation gathers the windows that cover its element in a fixed order:
// deterministic, no atomics.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2)
void main() {
  Op p = load_op();
  MaxPool2dBackwardParams q = load_MaxPool2dBackwardParams();
  int H = q.height, W = q.width, OH = q.out_h, OW = q.out_w;
  for (uint pl = gl_WorkGroupID.y; pl < uint(q.planes); pl += gl_NumWorkGroups.y) {
    uint base = pl * uint(OH * OW);
    for (uint t = gl_GlobalInvocationID.x; t < uint(H * W); t += gl_NumWorkGroups.x * WG) {
      int h = int(t / uint(W)), w = int(t) - h * W;
      // Windows o with o*s - pad <= h < o*s - pad + kernel.
      int th = h + q.padding[0], tw = w + q.padding[1];
      int oh0 = th - q.kernel[0] < 0 ? 0 : (th - q.kernel[0]) / q.stride[0] + 1;
      int ow0 = tw - q.kernel[1] < 0 ? 0 : (tw - q.kernel[1]) / q.stride[1] + 1;
      int oh1 = min(th / q.stride[0] + 1, OH), ow1 = min(tw / q.stride[1] + 1, OW);
      float s = 0.0;
      int me = int(t);
      for (int oh = oh0; oh < oh1; ++oh)
        for (int ow = ow0; ow < ow1; ++ow) {
          uint o = base + uint(oh * OW + ow);
          if (I(2)[O(2) + o] == me) s += F(1)[O(1) + o];
        }
      F(0)[O(0) + pl * uint(H * W) + t] = s;
    }
  }
}
