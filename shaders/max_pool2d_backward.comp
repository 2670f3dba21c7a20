// SPDX-License-Identifier: MIT
// max_pool2d_backward: dx[pl, h, w] = the sum of dy over the windows whose
// idx is (h, w) (MaxPool2dBackwardParams). args dx, dy, idx (i32).
// Dispatch: y over the planes (grid-stride), x over a plane's elements; each
// invocation gathers the windows that cover its element in a fixed order:
// deterministic, no atomics. Its row, column and window ranges come from
// reciprocals (common.glsl qdiv; flag bit 2 for planes of 2^22 elements or
// more), since CPU drivers divide integers one lane at a time.
#version 450
#define SY_QDIV
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2)

// floor(a / b) for 0 <= a.
int div_floor(int a, int b, float inv) { return int(qdiv(uint(a), uint(b), inv)); }

void main() {
  Op p = load_op();
  MaxPool2dBackwardParams q = load_MaxPool2dBackwardParams();
  int H = q.height, W = q.width, OH = q.out_h, OW = q.out_w;
  int K0 = q.kernel[0], K1 = q.kernel[1], S0 = q.stride[0], S1 = q.stride[1];
  float invW = 1.0 / float(W), inv0 = 1.0 / float(S0), inv1 = 1.0 / float(S1);
  for (uint pl = gl_WorkGroupID.y; pl < uint(q.planes); pl += gl_NumWorkGroups.y) {
    uint base = pl * uint(OH * OW);
    for (uint t = gl_GlobalInvocationID.x; t < uint(H * W); t += gl_NumWorkGroups.x * WG) {
      int h = div_floor(int(t), W, invW), w = int(t) - h * W;
      // Windows o with o*s - pad <= h < o*s - pad + kernel.
      int th = h + q.padding[0], tw = w + q.padding[1];
      int oh0 = th - K0 < 0 ? 0 : div_floor(th - K0, S0, inv0) + 1;
      int ow0 = tw - K1 < 0 ? 0 : div_floor(tw - K1, S1, inv1) + 1;
      int oh1 = min(div_floor(th, S0, inv0) + 1, OH), ow1 = min(div_floor(tw, S1, inv1) + 1, OW);
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
