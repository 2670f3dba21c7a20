// SPDX-License-Identifier: MIT
// Fused optimizer updates, in place, one pass over n parameters.
//
// sgd_update: w -= lr*(g + wd*w).
// sgd_momentum_update: d = g + wd*w; buf = first_step ? d : mom*buf +
//   (1 - dampening)*d; w -= lr*(nesterov ? d + mom*buf : buf).
// adam_update: Adam (wd*w added to the gradient) or AdamW (`decoupled`:
//   w *= 1 - lr*wd). m, v are the moment estimates; the step count t comes
//   from a device buffer (step[0], already incremented), so a replayed CUDA
//   graph sees each step's value. The bias corrections are computed per
//   thread from t.
//
// Launch geometry: 1-D grid-stride loops, 256-thread blocks, grid of
// ceil(n / 256) blocks capped at 32 per SM.
#include "cuda_math.cuh"

namespace switchyard::cuda_impl {
namespace {

__global__ void sgd_k(float* w, const float* g, int64_t n, float lr, float wd) {
  SY_GRID_STRIDE(j, n) pointwise::sgd_step(w[j], g[j], lr, wd);
}

__global__ void sgd_momentum_k(float* w, float* buf, const float* g, int64_t n, float lr, float mom,
                               float damp, float wd, bool nesterov, bool first) {
  SY_GRID_STRIDE(j, n)
  pointwise::sgd_momentum_step(w[j], buf[j], g[j], lr, mom, damp, wd, nesterov, first);
}

__global__ void adam_k(float* w, float* m, float* v, const float* g, const float* step, int64_t n,
                       float lr, float b1, float b2, float eps, float wd, bool decoupled) {
  float t = step[0];
  float bc1 = 1.f - powf(b1, t), bc2 = 1.f - powf(b2, t);
  float stepsize = lr / bc1, inv_sqrt_bc2 = 1.f / sqrtf(bc2);
  float keep = decoupled ? 1.f - lr * wd : 1.f, l2 = decoupled ? 0.f : wd;
  SY_GRID_STRIDE(j, n)
  pointwise::adam_step(w[j], m[j], v[j], g[j], b1, b2, eps, stepsize, inv_sqrt_bc2, keep, l2);
}

}  // namespace

void launch(const SgdParams& p, void* const* args, const LaunchEnv& env) {
  float* w = static_cast<float*>(args[0]);
  const float* g = static_cast<const float*>(args[1]);
  const int64_t n = p.n;
  if (n <= 0) return;
  SY_LAUNCH(sgd_k, blocks_for(n, env), kBlock, env.stream)(w, g, n, p.lr, p.weight_decay);
  SY_CUDA_LAUNCHED("sgd_update");
}

void launch(const SgdMomentumParams& p, void* const* args, const LaunchEnv& env) {
  float* w = static_cast<float*>(args[0]);
  float* buf = static_cast<float*>(args[1]);
  const float* g = static_cast<const float*>(args[2]);
  const int64_t n = p.n;
  if (n <= 0) return;
  SY_LAUNCH(sgd_momentum_k, blocks_for(n, env), kBlock, env.stream)
  (w, buf, g, n, p.lr, p.momentum, p.dampening, p.weight_decay, p.nesterov, p.first_step);
  SY_CUDA_LAUNCHED("sgd_momentum_update");
}

void launch(const AdamParams& p, void* const* args, const LaunchEnv& env) {
  float* w = static_cast<float*>(args[0]);
  float* m = static_cast<float*>(args[1]);
  float* v = static_cast<float*>(args[2]);
  const float* g = static_cast<const float*>(args[3]);
  const float* step = static_cast<const float*>(args[4]);
  const int64_t n = p.n;
  if (n <= 0) return;
  SY_LAUNCH(adam_k, blocks_for(n, env), kBlock, env.stream)
  (w, m, v, g, step, n, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.decoupled);
  SY_CUDA_LAUNCHED("adam_update");
}

}  // namespace switchyard::cuda_impl
