// adam_update, IN PLACE on p, m, v: Adam, or AdamW when i[1]=1 (decoupled
// weight decay). args p, m, v, g, step[1] (f32, already incremented).
// f[0]=lr f[1]=beta1 f[2]=beta2 f[3]=eps f[4]=weight_decay; i[0]=n. One
// invocation per 4 elements, vec4 when aligned. The bias corrections are
// computed per invocation from step (a device value, so the recorded command
// buffer never changes).
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RW(1) ARG_RW(2) ARG_RO(3) ARG_RO(4)
// b^t for the integral step count by repeated squaring: a few ulp, where
// pow() (exp2(t*log2(b))) loses digits that 1 - b^t then magnifies.
float powi(float b, float t) {
  if (t != floor(t) || t < 0.0 || t > 16777216.0) return pow(b, t);
  float r = 1.0;
  for (uint e = uint(t); e != 0u; e >>= 1u) {
    if ((e & 1u) != 0u) r *= b;
    b *= b;
  }
  return r;
}
void main() {
  Op p = load_op();
  uint n = uint(p.i[0]);
  float lr = p.f[0], b1 = p.f[1], b2 = p.f[2], eps = p.f[3], wd = p.f[4];
  float t = F(4)[O(4)];
  float bc1 = 1.0 - powi(b1, t), bc2 = 1.0 - powi(b2, t);
  float step = lr / bc1, inv_sqrt_bc2 = 1.0 / sqrt(bc2);
  float keep = p.i[1] != 0 ? 1.0 - lr * wd : 1.0, l2 = p.i[1] != 0 ? 0.0 : wd;
  FOR_ITEMS(k, (n + 3u) / 4u) {
    uint e = 4u * k;
    if (ALIGNED4 && e + 4u <= n) {
      vec4 w = V(0)[VO(0) + k] * keep;
      vec4 d = V(3)[VO(3) + k] + l2 * w;
      vec4 m = b1 * V(1)[VO(1) + k] + (1.0 - b1) * d;
      vec4 v = b2 * V(2)[VO(2) + k] + (1.0 - b2) * d * d;
      V(1)[VO(1) + k] = m;
      V(2)[VO(2) + k] = v;
      V(0)[VO(0) + k] = w - step * m / (sqrt(v) * inv_sqrt_bc2 + eps);
      continue;
    }
    for (uint j = e; j < min(e + 4u, n); ++j) {
      float w = F(0)[O(0) + j] * keep;
      float d = F(3)[O(3) + j] + l2 * w;
      float m = b1 * F(1)[O(1) + j] + (1.0 - b1) * d;
      float v = b2 * F(2)[O(2) + j] + (1.0 - b2) * d * d;
      F(1)[O(1) + j] = m;
      F(2)[O(2) + j] = v;
      F(0)[O(0) + j] = w - step * m / (sqrt(v) * inv_sqrt_bc2 + eps);
    }
  }
}
