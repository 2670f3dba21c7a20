// SPDX-License-Identifier: MIT
// batch_norm_coef_backward: from the forward's coef (4, C: mean, scale, bias,
// inv) and sums (2, C: sum of dy, sum of dy * (x - mean)) over `count` values
// a channel, out (6, C) = [0, scale, k0, mean, k, dweight] with, when
// training, k = -scale * inv * dweight / count and k0 = -scale * sums[0] /
// count (else 0), dweight = inv * sums[1] (BatchNormCoefBackwardParams).
// args out, coef, sums. One invocation per channel.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2)
void main() {
  Op p = load_op();
  BatchNormCoefBackwardParams q = load_BatchNormCoefBackwardParams();
  uint C = uint(q.channels);
  float per = 1.0 / float(q.count);
  FOR_ITEMS(c, C) {
    float mean = F(1)[O(1) + c], scale = F(1)[O(1) + C + c], inv = F(1)[O(1) + 3u * C + c];
    float dweight = inv * F(2)[O(2) + C + c];
    F(0)[O(0) + c] = 0.0;
    F(0)[O(0) + C + c] = scale;
    F(0)[O(0) + 2u * C + c] = q.training ? -(scale * F(2)[O(2) + c] * per) : 0.0;
    F(0)[O(0) + 3u * C + c] = mean;
    F(0)[O(0) + 4u * C + c] = q.training ? -(scale * inv * dweight * per) : 0.0;
    F(0)[O(0) + 5u * C + c] = dweight;
  }
}
