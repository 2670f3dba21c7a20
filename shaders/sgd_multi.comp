// SPDX-License-Identifier: MIT
// sgd_multi: sgd_update (has_buf: sgd_momentum_update) over up to
// SY_MULTI_TABLE tensors in one launch, IN PLACE on each tensor's p (and
// buf); SgdMultiParams.
//
// Binding and table as adam_multi.comp (multi.glsl): each MultiEntry holds
// the offsets of p (off[0]), buf (off[1]) and g (off_g) from their windows'
// starts, the element count, the windows and its first piece. u_off.x is
// the launch's tensor count and u_misc.w (aux) its pieces.
//
// Geometry: a tensor is cut into pieces of 4 * WG elements, each a
// workgroup's (grid-stride over the launch's pieces, tensor after tensor);
// each invocation takes 4 elements: one vec4 with SY_MULTI_VEC4, else 4
// WG apart. One launch, no second pass.
#version 450
#define SY_MULTI_TABLE 32
#include "common.glsl"
#include "multi.glsl"

SgdMultiParams q;
// The step on 4 elements (or one, splatted): the new p; b is buf.
vec4 update(vec4 w, vec4 g, inout vec4 b) {
  const vec4 d = g + q.weight_decay * w;
  if (!q.has_buf) return w - q.lr * d;
  b = q.first_step ? d : q.momentum * b + (1.0 - q.dampening) * d;
  return w - q.lr * (q.nesterov ? d + q.momentum * b : b);
}

void main() {
  const uint count = u_off.x;
  q = load_SgdMultiParams();
  const uint pieces = u_misc.w, piece_len = 4u * WG;
  uint t = 0u;
  for (uint piece = gl_WorkGroupID.x; piece < pieces; piece += gl_NumWorkGroups.x) {
    while (t + 1u < count && piece >= u_multi[2u * t + 3u].w) ++t;
    const uvec4 o = u_multi[2u * t], e = u_multi[2u * t + 1u];
    const uint wp = window(e, 0u), wb = window(e, 1u), wg = window(e, 4u);
    const uint base = (piece - e.w) * piece_len;
    const uint first = base + (SY_MULTI_VEC4 ? 4u : 1u) * gl_LocalInvocationID.x;
    if (SY_MULTI_VEC4 && first + 4u <= e.y) {
      const uint p4 = (o.x + first) / 4u, b4 = (o.y + first) / 4u;
      vec4 b = q.has_buf ? V(0)[b4] : vec4(0.0);
      const vec4 w = update(V(0)[p4], V(0)[(e.x + first) / 4u], b);
      if (q.has_buf) V(0)[b4] = b;
      V(0)[p4] = w;
      continue;
    }
    for (uint k = 0u; k < 4u; ++k) {  // one at a time (a vec4 tensor's last few)
      const uint j = first + (SY_MULTI_VEC4 ? 1u : WG) * k;
      if (j >= e.y) break;
      vec4 b = vec4(q.has_buf ? ld(wb, o.y + j) : 0.0);
      const float w = update(vec4(ld(wp, o.x + j)), vec4(ld(wg, e.x + j)), b).x;
      if (q.has_buf) st(wb, o.y + j, b.x);
      st(wp, o.x + j, w);
    }
  }
}
