// SPDX-License-Identifier: MIT
// adam_update, IN PLACE on p, m, v: Adam, or AdamW when `decoupled`. args
// p, m, v, g, step[1] (f32, already incremented); AdamParams. One
// invocation per 4 elements, vec4 when aligned. The bias corrections are
// computed per invocation from step (a device value, so the recorded command
// buffer never changes).
#version 450
#include "common.glsl"
#include "optim.glsl"
ARG_RW(0) ARG_RW(1) ARG_RW(2) ARG_RO(3) ARG_RO(4)
// Per launch: bias corrections from the device-side step count.
struct Adam { float b1, b2, eps, step, inv_sqrt_bc2, keep, l2; };
Adam adam;
void vec_item(Op p, uint k) {
  vec4 w = V(0)[VO(0) + k] * adam.keep;
  vec4 d = V(3)[VO(3) + k] + adam.l2 * w;
  vec4 m = adam.b1 * V(1)[VO(1) + k] + (1.0 - adam.b1) * d;
  vec4 v = adam.b2 * V(2)[VO(2) + k] + (1.0 - adam.b2) * d * d;
  V(1)[VO(1) + k] = m;
  V(2)[VO(2) + k] = v;
  V(0)[VO(0) + k] = w - adam.step * m / (sqrt(v) * adam.inv_sqrt_bc2 + adam.eps);
}
void one_item(Op p, uint j) {
  float w = F(0)[O(0) + j] * adam.keep;
  float d = F(3)[O(3) + j] + adam.l2 * w;
  float m = adam.b1 * F(1)[O(1) + j] + (1.0 - adam.b1) * d;
  float v = adam.b2 * F(2)[O(2) + j] + (1.0 - adam.b2) * d * d;
  F(1)[O(1) + j] = m;
  F(2)[O(2) + j] = v;
  F(0)[O(0) + j] = w - adam.step * m / (sqrt(v) * adam.inv_sqrt_bc2 + adam.eps);
}
void main() {
  Op p = load_op();
  AdamParams q = load_AdamParams();
  float lr = q.lr, wd = q.weight_decay;
  float t = F(4)[O(4)];
  adam.b1 = q.beta1;
  adam.b2 = q.beta2;
  adam.eps = q.eps;
  float bc1 = 1.0 - powi(adam.b1, t), bc2 = 1.0 - powi(adam.b2, t);
  adam.step = lr / bc1;
  adam.inv_sqrt_bc2 = 1.0 / sqrt(bc2);
  adam.keep = q.decoupled ? 1.0 - lr * wd : 1.0;
  adam.l2 = q.decoupled ? 0.0 : wd;
  ELEMENTWISE(p, uint(q.n))
}
