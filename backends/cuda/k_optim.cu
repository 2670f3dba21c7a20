// Fused optimizer updates, in place, one pass over n = p.i[0] parameters.
//
// sgd_update: d = g + wd*w; with momentum (p.i[3] = 1) buf = first step
//   (p.i[2]) ? d : mom*buf + (1 - dampening)*d and w -= lr*(nesterov ?
//   d + mom*buf : buf); without, w -= lr*d. f[0..3] = lr, momentum,
//   dampening, weight decay; i[1] = nesterov.
// adam_update: Adam (p.i[1] = 0: wd*w added to the gradient) or AdamW
//   (p.i[1] = 1: w *= 1 - lr*wd). m, v are the moment estimates; the step
//   count t comes from a device buffer (step[0], already incremented), so a
//   replayed CUDA graph sees each step's value. f[0..4] = lr, beta1, beta2,
//   eps, weight decay. The bias corrections are computed per thread from t.
//
// Launch geometry: 1-D grid-stride loops, 256-thread blocks, grid of
// ceil(n / 256) blocks capped at 32 per SM.
#include "cuda_math.cuh"

namespace switchyard::cuda_impl {
namespace {

__global__ void sgd_k(float* w, float* buf, const float* g, int64_t n, float lr, float mom, float damp,
                      float wd, bool nesterov, bool first) {
  if (!buf) {
    SY_GRID_STRIDE(j, n) pointwise::sgd_step(w[j], g[j], lr, wd);
    return;
  }
  SY_GRID_STRIDE(j, n) pointwise::sgd_momentum_step(w[j], buf[j], g[j], lr, mom, damp, wd, nesterov, first);
}

__global__ void adam_k(float* w, float* m, float* v, const float* g, const float* step, int64_t n, float lr,
                       float b1, float b2, float eps, float wd, bool decoupled) {
  float t = step[0];
  float bc1 = 1.f - powf(b1, t), bc2 = 1.f - powf(b2, t);
  float stepsize = lr / bc1, inv_sqrt_bc2 = 1.f / sqrtf(bc2);
  float keep = decoupled ? 1.f - lr * wd : 1.f, l2 = decoupled ? 0.f : wd;
  SY_GRID_STRIDE(j, n) pointwise::adam_step(w[j], m[j], v[j], g[j], b1, b2, eps, stepsize, inv_sqrt_bc2, keep, l2);
}

}  // namespace

void launch_sgd_update(const KernelParams& p, float* w, float* buf, const float* g, const LaunchEnv& env) {
  int64_t n = p.i[0];
  if (n <= 0) return;
  SY_LAUNCH(sgd_k, blocks_for(n, env), kBlock, env.stream)(w, p.i[3] ? buf : nullptr, g, n, p.f[0], p.f[1], p.f[2],
                                                        p.f[3], p.i[1] != 0, p.i[2] != 0);
  SY_CUDA_LAUNCHED("sgd_update");
}

void launch_adam_update(const KernelParams& p, float* w, float* m, float* v, const float* g, const float* step,
                        const LaunchEnv& env) {
  int64_t n = p.i[0];
  if (n <= 0) return;
  SY_LAUNCH(adam_k, blocks_for(n, env), kBlock, env.stream)(w, m, v, g, step, n, p.f[0], p.f[1], p.f[2], p.f[3],
                                                         p.f[4], p.i[1] != 0);
  SY_CUDA_LAUNCHED("adam_update");
}

}  // namespace switchyard::cuda_impl
