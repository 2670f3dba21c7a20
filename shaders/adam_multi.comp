// SPDX-License-Identifier: MIT
// adam_multi: adam_update over up to SY_MULTI_TABLE tensors in one launch,
// IN PLACE on each tensor's p, m, v and step; AdamMultiParams.
//
// Binding: bindings 0-4 are windows of the device's memory blocks, each
// holding some of the launch's tensors; the launch's table entry is
// followed by one MultiEntry per tensor (vk_launch.h): its arguments'
// offsets in elements from their windows' starts, its element count, the
// window of each argument (3 bits each: p, m, v, step, g) and its first
// piece. A tensor past one binding is cut into chunks, an entry each. The
// table's argument offsets are unused: u_off.x is the launch's tensor count
// and u_misc.w (aux) its pieces.
//
// Geometry: a tensor is cut into pieces of 4 * WG elements, each a
// workgroup's (grid-stride over the launch's pieces, tensor after tensor);
// each invocation takes 4 elements: one vec4 with SY_MULTI_VEC4 (multi.glsl),
// else 4 WG apart. A workgroup's tensor, and so
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

#include "multi.glsl"
// The entry's tensor counts this step (vk_launch.h's kMultiCounts): a tensor
// cut into chunks (each within a binding) has an entry per chunk.
#define SY_MULTI_COUNTS 32768u

AdamMultiParams q;
// The step on 4 elements (or one, splatted): the new p; m, v its moments.
vec4 update(vec4 p, vec4 g, inout vec4 m, inout vec4 v, float lr_t, float inv_sqrt_bc2) {
  const vec4 w = p * (q.decoupled ? 1.0 - q.lr * q.weight_decay : 1.0);
  const vec4 d = g + (q.decoupled ? 0.0 : q.weight_decay) * w;
  m = q.beta1 * m + (1.0 - q.beta1) * d;
  v = q.beta2 * v + (1.0 - q.beta2) * d * d;
  return w - lr_t * m / (sqrt(v) * inv_sqrt_bc2 + q.eps);
}

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
  q = load_AdamMultiParams();
  const uint pieces = u_misc.w, piece_len = 4u * WG;
  uint t = 0u;
  for (uint piece = gl_WorkGroupID.x; piece < pieces; piece += gl_NumWorkGroups.x) {
    while (t + 1u < count && piece >= u_multi[2u * t + 3u].w) ++t;
    const uvec4 o = u_multi[2u * t], e = u_multi[2u * t + 1u];
    const uint wp = window(e, 0u), wm = window(e, 1u), wv = window(e, 2u), wg = window(e, 4u);
    const float step = ld(window(e, 3u), o.w) + 1.0;
    const float lr_t = q.lr / (1.0 - powi(q.beta1, step));
    const float inv_sqrt_bc2 = 1.0 / sqrt(1.0 - powi(q.beta2, step));
    const uint base = (piece - e.w) * piece_len;
    const uint first = base + (SY_MULTI_VEC4 ? 4u : 1u) * gl_LocalInvocationID.x;
    if (SY_MULTI_VEC4 && first + 4u <= e.y) {
      const uint p4 = (o.x + first) / 4u, m4 = (o.y + first) / 4u, v4 = (o.z + first) / 4u;
      vec4 m = V(0)[m4], v = V(0)[v4];
      const vec4 w = update(V(0)[p4], V(0)[(e.x + first) / 4u], m, v, lr_t, inv_sqrt_bc2);
      V(0)[m4] = m;
      V(0)[v4] = v;
      V(0)[p4] = w;
      continue;
    }
    for (uint k = 0u; k < 4u; ++k) {  // one at a time (a vec4 tensor's last few)
      const uint j = first + (SY_MULTI_VEC4 ? 1u : WG) * k;
      if (j >= e.y) break;
      vec4 m = vec4(ld(wm, o.y + j)), v = vec4(ld(wv, o.z + j));
      const float w =
          update(vec4(ld(wp, o.x + j)), vec4(ld(wg, e.x + j)), m, v, lr_t, inv_sqrt_bc2).x;
      st(wm, o.y + j, m.x);
      st(wv, o.z + j, v.x);
      st(wp, o.x + j, w);
    }
  }
}
