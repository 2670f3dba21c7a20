// SPDX-License-Identifier: MIT
// reduce_sum: out[o, i] = scale * sum_l in[o, l, i] over (outer, len, inner)
// (ReduceSumParams). SY_ROW_GROUPS (set for inner == 1 only): one
// workgroup per row (grid-stride over rows), a workgroup reduction.
// Otherwise one invocation per output (o, i), summing down the column
// (consecutive invocations read consecutive addresses).
//
// Split (vk_plan.cpp's plan_launches, when the outputs are too few to fill
// the device, a column is longer than the driver's loop budget or the input
// passes maxStorageBufferRange):
// len is cut into aux parts of ceil(len / aux); the kPartials pass writes
// part z of output j to scratch[z * outputs + j] (binding 4), in the
// geometry above with each workgroup or invocation taking one (part,
// output); the kFinish pass adds each output's parts in order, one
// invocation per output. No atomics: the same sums on every run. An input
// past maxStorageBufferRange (outer == 1) has its kPartials pass as several
// launches, each over a range of parts: its own len (its rows), aux (its
// parts) and scratch slots, so the indexing here is the same.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RW(4)
#include "reduce.glsl"

// Kahan summation: long columns (batch sums) keep their precision.
struct Kahan {
  float s, c;
};
void kahan_add(inout Kahan k, float v) {
  precise float y = v - k.c;  // precise: no contraction or reordering may drop the correction
  precise float t = k.s + y;
  precise float c = (t - k.s) - y;
  k.c = c;
  k.s = t;
}

void main() {
  Op p = load_op();
  ReduceSumParams q = load_ReduceSumParams();
  uint outer = uint(q.outer), len = uint(q.len), inner = uint(q.inner);
  uint outputs = outer * inner;
  bool partials = (SPEC_FLAGS & SY_PARTIALS) != 0u;
  uint parts = partials ? p.aux : 1u, chunk = (len + parts - 1u) / parts;
  if ((SPEC_FLAGS & SY_FINISH) != 0u) {
    FOR_ITEMS(j, outputs) {
      Kahan k = Kahan(0.0, 0.0);
      for (uint z = 0u; z < p.aux; ++z) kahan_add(k, F(4)[O(4) + z * outputs + j]);
      F(0)[O(0) + j] = k.s * q.scale;
    }
    return;
  }
  if (SY_ROW_GROUPS) {
    // Item k = (part z, row r) = (k / outer, k % outer).
    for (uint k = gl_WorkGroupID.x; k < outputs * parts; k += gl_NumWorkGroups.x) {
      uint z = k / outer, r = k % outer;
      uint l0 = z * chunk, l1 = min(len, l0 + chunk);
      uint base = O(1) + r * len;
      float s = 0.0;
      if ((p.flags & 2u) != 0u && chunk % 4u == 0u) {  // rows (and parts) of whole, aligned vec4s
        vec4 sv = vec4(0.0);
        for (uint l = l0 / 4u + gl_LocalInvocationID.x; l < l1 / 4u; l += WG) sv += V(1)[base / 4u + l];
        s = (sv.x + sv.y) + (sv.z + sv.w);
      } else {
        for (uint l = l0 + gl_LocalInvocationID.x; l < l1; l += WG) s += F(1)[base + l];
      }
      s = wg_sum(s);
      if (gl_LocalInvocationID.x == 0u) {
        if (partials) F(4)[O(4) + k] = s;
        else F(0)[O(0) + r] = s * q.scale;
      }
    }
    return;
  }
  // Item k = (part z, output j) = (k / outputs, k % outputs), j = (o, i).
  FOR_ITEMS(k, outputs * parts) {
    uint z = k / outputs, j = k % outputs;
    uint o = j / inner, i = j % inner;
    uint base = O(1) + o * len * inner + i;
    Kahan acc = Kahan(0.0, 0.0);
    for (uint l = z * chunk; l < min(len, z * chunk + chunk); ++l) kahan_add(acc, F(1)[base + l * inner]);
    if (partials) F(4)[O(4) + k] = acc.s;
    else F(0)[O(0) + j] = acc.s * q.scale;
  }
}
