// SPDX-License-Identifier: MIT
// adam_multi: adam_update over up to SY_MULTI_TABLE tensors in one launch,
// IN PLACE on each tensor's p, m, v and step; AdamMultiParams.
//
// Binding: bindings 0-4 are windows of the device's memory blocks, each
// holding some of the launch's tensors; the launch's table entry is
// followed by one MultiEntry per tensor (vk_launch.h): its arguments'
// offsets in elements from their windows' starts, its element count, the
// window of each argument (3 bits each: p, m, v, step, g) and its first
// piece. A tensor past one binding is cut into chunks, an entry each. The table's argument offsets are unused: u_off.x is the launch's
// tensor count and u_misc.w (aux) its pieces.
//
// Geometry: a tensor is cut into pieces of 4 * WG elements, each a
// workgroup's (grid-stride over the launch's pieces, tensor after tensor);
// each invocation takes 4 elements WG apart. A workgroup's tensor, and so
// its windows, are the same for all its invocations (dynamically uniform).
//
// The step counts: the update pass reads each tensor's step and uses one
// more; a second launch (SY_FINISH, after a barrier, once every update
// launch of the step has run) writes them back incremented, one invocation
// per entry, by each tensor's first entry.
#version 450
#define SY_MULTI_TABLE 32
#include "common.glsl"
#include "optim.glsl"
ARG_RW(0) ARG_RW(1) ARG_RW(2) ARG_RW(3) ARG_RW(4)

float ld(uint w, uint i) {
  switch (w) {
    case 0u: return F(0)[i];
    case 1u: return F(1)[i];
    case 2u: return F(2)[i];
    case 3u: return F(3)[i];
  }
  return F(4)[i];
}
void st(uint w, uint i, float v) {
  switch (w) {
    case 0u: F(0)[i] = v; return;
    case 1u: F(1)[i] = v; return;
    case 2u: F(2)[i] = v; return;
    case 3u: F(3)[i] = v; return;
  }
  F(4)[i] = v;
}
uint window(uvec4 e, uint arg) { return (e.z >> (3u * arg)) & 7u; }
// The entry's tensor counts this step (vk_launch.h's kMultiCounts): a tensor
// cut into chunks (each within a binding) has an entry per chunk.
#define SY_MULTI_COUNTS 32768u

void main() {
  const uint count = u_off.x;
  if ((SPEC_FLAGS & SY_FINISH) != 0u) {
    const uint t = gl_GlobalInvocationID.x;
    if (t < count && (u_multi[2u * t + 1u].z & SY_MULTI_COUNTS) != 0u) {
      const uint w = window(u_multi[2u * t + 1u], 3u), o = u_multi[2u * t].w;
      st(w, o, ld(w, o) + 1.0);
    }
    return;
  }
  AdamMultiParams q = load_AdamMultiParams();
  const float b1 = q.beta1, b2 = q.beta2, eps = q.eps;
  const float keep = q.decoupled ? 1.0 - q.lr * q.weight_decay : 1.0;
  const float l2 = q.decoupled ? 0.0 : q.weight_decay;
  const uint pieces = u_misc.w, piece_len = 4u * WG;
  uint t = 0u;
  for (uint piece = gl_WorkGroupID.x; piece < pieces; piece += gl_NumWorkGroups.x) {
    while (t + 1u < count && piece >= u_multi[2u * t + 3u].w) ++t;
    const uvec4 o = u_multi[2u * t], e = u_multi[2u * t + 1u];
    const uint wp = window(e, 0u), wm = window(e, 1u), wv = window(e, 2u), wg = window(e, 4u);
    const float step = ld(window(e, 3u), o.w) + 1.0;
    const float lr_t = q.lr / (1.0 - powi(b1, step));
    const float inv_sqrt_bc2 = 1.0 / sqrt(1.0 - powi(b2, step));
    const uint base = (piece - e.w) * piece_len + gl_LocalInvocationID.x;
    for (uint k = 0u; k < 4u; ++k) {
      const uint j = base + k * WG;
      if (j >= e.y) break;
      const float w = ld(wp, o.x + j) * keep;
      const float d = ld(wg, e.x + j) + l2 * w;
      const float m = b1 * ld(wm, o.y + j) + (1.0 - b1) * d;
      const float v = b2 * ld(wv, o.z + j) + (1.0 - b2) * d * d;
      st(wm, o.y + j, m);
      st(wv, o.z + j, v);
      st(wp, o.x + j, w - lr_t * m / (sqrt(v) * inv_sqrt_bc2 + eps));
    }
  }
}
