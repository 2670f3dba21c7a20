// SPDX-License-Identifier: MIT
// col2im: dx[n, c, h, w] = sum over the taps (kh, kw) of cols[(c, kh, kw),
// (n, oh, ow)] where oh*s0 - p0 + kh*d0 = h and ow*s1 - p1 + kw*d1 = w
// (Col2imParams): im2col's adjoint, the convolution's input gradient.
// Dispatch: y over the (n, c) planes (grid-stride), x over a plane's
// elements; each invocation gathers its taps in a fixed order: no atomics,
// the same result every run.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
// The output index o with o * s = t, or -1 when there is none below `limit`.
int tap_index(int t, int s, int limit) {
  if (t < 0) return -1;
  int o = s == 1 ? t : t / s;
  return (o * s == t && o < limit) ? o : -1;
}
void main() {
  Op p = load_op();
  Col2imParams q = load_Col2imParams();
  int K0 = q.kernel[0], K1 = q.kernel[1], OH = q.out_h, OW = q.out_w;
  uint H = uint(q.height), W = uint(q.width), N = uint(q.batch), C = uint(q.channels);
  uint ncols = N * uint(OH * OW);
  for (uint pl = gl_WorkGroupID.y; pl < N * C; pl += gl_NumWorkGroups.y) {
    uint n = pl / C, c = pl - n * C;
    uint src = O(1) + c * uint(K0 * K1) * ncols + n * uint(OH * OW);
    for (uint t = gl_GlobalInvocationID.x; t < H * W; t += gl_NumWorkGroups.x * WG) {
      int h = int(t / W), w = int(t % W);
      float s = 0.0;
      for (int kh = 0; kh < K0; ++kh) {
        int oh = tap_index(h + q.padding[0] - kh * q.dilation[0], q.stride[0], OH);
        if (oh < 0) continue;
        for (int kw = 0; kw < K1; ++kw) {
          int ow = tap_index(w + q.padding[1] - kw * q.dilation[1], q.stride[1], OW);
          if (ow < 0) continue;
          s += F(1)[src + uint(kh * K1 + kw) * ncols + uint(oh * OW + ow)];
        }
      }
      F(0)[O(0) + pl * H * W + t] = s;
    }
  }
}
