// softmax (op 0) or log_softmax (op 1) of each row. i[0]=rows i[1]=cols. One
// workgroup per row (grid-stride over rows); max and sum are workgroup
// reductions.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1)
#include "reduce.glsl"
void main() {
  Op p = load_op();
  uint rows = uint(p.i[0]), cols = uint(p.i[1]);
  uint t = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
    uint x0 = O(1) + r * cols, y0 = O(0) + r * cols;
    float m = -1.0 / 0.0;
    for (uint c = t; c < cols; c += WG) m = max(m, F(1)[x0 + c]);
    m = wg_max(m);
    float s = 0.0;
    for (uint c = t; c < cols; c += WG) s += exp(F(1)[x0 + c] - m);
    s = wg_sum(s);
    if (p.op == 1) {
      float lse = m + log(s);
      for (uint c = t; c < cols; c += WG) F(0)[y0 + c] = F(1)[x0 + c] - lse;
    } else {
      float inv = 1.0 / s;
      for (uint c = t; c < cols; c += WG) F(0)[y0 + c] = exp(F(1)[x0 + c] - m) * inv;
    }
  }
}
