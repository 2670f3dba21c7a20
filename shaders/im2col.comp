// SPDX-License-Identifier: MIT
// im2col: cols[(c, kh, kw), (n, oh, ow)] = x[n, c, oh*s0 - p0 + kh*d0,
// ow*s1 - p1 + kw*d1], 0 outside the plane (Im2colParams): the convolution's
// GEMM operand. Dispatch: y over the (row, sample) pairs (grid-stride), x over
// one sample's OH * OW columns of that row, consecutive invocations writing
// consecutive columns (one division per element).
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
void main() {
  Op p = load_op();
  Im2colParams q = load_Im2colParams();
  uint K0 = uint(q.kernel[0]), K1 = uint(q.kernel[1]), OH = uint(q.out_h), OW = uint(q.out_w);
  uint H = uint(q.height), W = uint(q.width), N = uint(q.batch), C = uint(q.channels);
  uint ncols = N * OH * OW, pairs = C * K0 * K1 * N;
  for (uint pr = gl_WorkGroupID.y; pr < pairs; pr += gl_NumWorkGroups.y) {
    uint row = pr / N, n = pr - row * N;
    uint kw = row % K1, kh = row / K1 % K0, c = row / (K1 * K0);
    int h0 = int(kh) * q.dilation[0] - q.padding[0], w0 = int(kw) * q.dilation[1] - q.padding[1];
    uint plane = O(1) + (n * C + c) * H * W, dst = O(0) + row * ncols + n * OH * OW;
    for (uint t = gl_GlobalInvocationID.x; t < OH * OW; t += gl_NumWorkGroups.x * WG) {
      uint oh = t / OW, ow = t - oh * OW;
      int ih = int(oh) * q.stride[0] + h0, iw = int(ow) * q.stride[1] + w0;
      float v = 0.0;
      if (ih >= 0 && ih < int(H) && iw >= 0 && iw < int(W)) v = F(1)[plane + uint(ih) * W + uint(iw)];
      F(0)[dst + t] = v;
    }
  }
}
