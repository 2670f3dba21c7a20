// sgd_update, IN PLACE: SGD with momentum, dampening, weight decay, Nesterov.
// args p, buf, g when i[3]=1 (momentum), else p, g (the backend binds g to
// binding 2 either way). f[0]=lr f[1]=momentum
// f[2]=dampening f[3]=weight_decay; i[0]=n i[1]=nesterov i[2]=first step
// (buf = d). One invocation per 4 elements, vec4 when aligned.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RW(1) ARG_RO(2)
void main() {
  Op p = load_op();
  uint n = uint(p.i[0]);
  float lr = p.f[0], mom = p.f[1], damp = p.f[2], wd = p.f[3];
  bool has_buf = p.i[3] != 0, nesterov = p.i[1] != 0, first = p.i[2] != 0;
  FOR_ITEMS(k, (n + 3u) / 4u) {
    uint e = 4u * k;
    if (ALIGNED4 && e + 4u <= n) {
      vec4 w = V(0)[VO(0) + k];
      vec4 d = V(2)[VO(2) + k] + wd * w;
      if (!has_buf) { V(0)[VO(0) + k] = w - lr * d; continue; }
      vec4 b = first ? d : mom * V(1)[VO(1) + k] + (1.0 - damp) * d;
      V(1)[VO(1) + k] = b;
      V(0)[VO(0) + k] = w - lr * (nesterov ? d + mom * b : b);
      continue;
    }
    for (uint j = e; j < min(e + 4u, n); ++j) {
      float w = F(0)[O(0) + j];
      float d = F(2)[O(2) + j] + wd * w;
      if (!has_buf) { F(0)[O(0) + j] = w - lr * d; continue; }
      float b = first ? d : mom * F(1)[O(1) + j] + (1.0 - damp) * d;
      F(1)[O(1) + j] = b;
      F(0)[O(0) + j] = w - lr * (nesterov ? d + mom * b : b);
    }
  }
}
