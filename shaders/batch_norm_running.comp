// SPDX-License-Identifier: MIT
// batch_norm_running, IN PLACE on rm and rv: r += momentum * (stat - r), as
// an SGD step with lr = -momentum and weight decay -1 (sgd_update.comp's
// formula), the variance's statistic unbiased by count / (count - 1)
// (BatchNormRunningParams). args rm, rv, stats (2, C: mean, biased var).
// One invocation per channel.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RW(1) ARG_RO(2)
void main() {
  Op p = load_op();
  BatchNormRunningParams q = load_BatchNormRunningParams();
  uint C = uint(q.channels);
  float lr = -q.momentum, unbias = float(q.count) / float(q.count - 1);
  FOR_ITEMS(c, C) {
    float m = F(0)[O(0) + c], v = F(1)[O(1) + c];
    F(0)[O(0) + c] = m - lr * (F(2)[O(2) + c] + -1.0 * m);
    F(1)[O(1) + c] = v - lr * (F(2)[O(2) + C + c] * unbias + -1.0 * v);
  }
}
