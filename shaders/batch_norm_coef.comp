// SPDX-License-Identifier: MIT
// batch_norm_coef: per channel c, inv = 1 / sqrt(var[c] + eps) and out (4, C)
// = [mean, inv * weight (inv without has_weight), bias (0 without has_bias),
// inv]: channel_affine's coefficient rows and inv (BatchNormCoefParams).
// args out, mean, var, weight, bias. One invocation per channel.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3) ARG_RO(4)
void main() {
  Op p = load_op();
  BatchNormCoefParams q = load_BatchNormCoefParams();
  uint C = uint(q.channels);
  FOR_ITEMS(c, C) {
    float inv = 1.0 / sqrt(F(2)[O(2) + c] + q.eps);
    F(0)[O(0) + c] = F(1)[O(1) + c];
    F(0)[O(0) + C + c] = q.has_weight ? inv * F(3)[O(3) + c] : inv;
    F(0)[O(0) + 2u * C + c] = q.has_bias ? F(4)[O(4) + c] : 0.0;
    F(0)[O(0) + 3u * C + c] = inv;
  }
}
