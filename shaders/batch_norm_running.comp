// SPDX-License-Identifier: MIT
// batch_norm_running, IN PLACE on rm and rv: r += momentum * (stat - r), as
// an SGD step with lr = -momentum and weight decay -1 (sgd_update.comp's
// formula), the variance's statistic unbiased by count / (count - 1)
// (BatchNormRunningParams). args rm, rv, stats (2, C: mean, biased var), or
// with has_count rm, rv, num_batches_tracked (i64 as two words, incremented
// by invocation 0), stats. One invocation per channel.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RW(1) ARG_RW(2) ARG_RO(3)
void main() {
  Op p = load_op();
  BatchNormRunningParams q = load_BatchNormRunningParams();
  uint C = uint(q.channels);
  float lr = -q.momentum, unbias = float(q.count) / float(q.count - 1);
  if (q.has_count && gl_GlobalInvocationID.x == 0u) {  // the i64 count: low word, carry
    uint lo = U(2)[O(2)] + 1u;
    U(2)[O(2)] = lo;
    if (lo == 0u) U(2)[O(2) + 1u] += 1u;
  }
  // The statistics: argument 3 with a count, else 2.
  FOR_ITEMS(c, C) {
    float m = F(0)[O(0) + c], v = F(1)[O(1) + c];
    float sm = q.has_count ? F(3)[O(3) + c] : F(2)[O(2) + c];
    float sv = q.has_count ? F(3)[O(3) + C + c] : F(2)[O(2) + C + c];
    F(0)[O(0) + c] = m - lr * (sm + -1.0 * m);
    F(1)[O(1) + c] = v - lr * (sv * unbias + -1.0 * v);
  }
}
