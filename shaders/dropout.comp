// SPDX-License-Identifier: MIT
// dropout: out = in * (u >= p ? scale : 0), u element k's uniform draw of
// rand_uniform's Philox stream (DropoutParams; the same bits as
// rand_uniform.comp with low 0, high 1). args out, in. One invocation per
// element.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
#include "philox.glsl"
void main() {
  Op p = load_op();
  DropoutParams q = load_DropoutParams();
  FOR_ITEMS(k, q.n) {
    precise float u = float(philox_at(q.seed, q.offset, k).x >> 8) * kTwoPow24;
    F(0)[O(0) + k] = F(1)[O(1) + k] * (u >= q.p ? q.scale : 0.0);
  }
}
