// sgd_update, IN PLACE: SGD with momentum, dampening, weight decay, Nesterov.
// args p, buf, g when i[3]=1 (momentum), else p, g (the backend binds g to
// binding 2 either way). f[0]=lr f[1]=momentum
// f[2]=dampening f[3]=weight_decay; i[0]=n i[1]=nesterov i[2]=first step
// (buf = d). One invocation per 4 elements, vec4 when aligned.
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RW(1) ARG_RO(2)
void vec_item(Op p, uint k) {
  float lr = p.f[0], mom = p.f[1], damp = p.f[2], wd = p.f[3];
  vec4 w = V(0)[VO(0) + k];
  vec4 d = V(2)[VO(2) + k] + wd * w;
  if ((p.flags & 32u) == 0u) {  // no momentum buffer (i[3] = 0)
    V(0)[VO(0) + k] = w - lr * d;
    return;
  }
  vec4 b = p.i[2] != 0 ? d : mom * V(1)[VO(1) + k] + (1.0 - damp) * d;
  V(1)[VO(1) + k] = b;
  V(0)[VO(0) + k] = w - lr * ((p.flags & 64u) != 0u ? d + mom * b : b);  // nesterov
}
void one_item(Op p, uint j) {
  float lr = p.f[0], mom = p.f[1], damp = p.f[2], wd = p.f[3];
  float w = F(0)[O(0) + j];
  float d = F(2)[O(2) + j] + wd * w;
  if ((p.flags & 32u) == 0u) {
    F(0)[O(0) + j] = w - lr * d;
    return;
  }
  float b = p.i[2] != 0 ? d : mom * F(1)[O(1) + j] + (1.0 - damp) * d;
  F(1)[O(1) + j] = b;
  F(0)[O(0) + j] = w - lr * ((p.flags & 64u) != 0u ? d + mom * b : b);
}
void main() {
  Op p = load_op();
  ELEMENTWISE(p, uint(p.i[0]))
}
