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
// adam_multi: adam_update over up to kMultiTensors tensors a launch (more
//   in launches of that many), its table of addresses and sizes passed by
//   value. Each tensor gets ceil(n / kMultiChunk) blocks (at least one),
//   each block a chunk of it. Every block reads its tensor's step count
//   and uses it + 1; the last block to finish (a ticket counter, reset by
//   it) writes the incremented counts, after every block has read them.
// sgd_multi: sgd_update (or sgd_momentum_update) over up to kMultiTensors
//   tensors a launch, chunked into blocks as adam_multi.
//
// The learning rate (kLearningRate): in a CUDA graph, read from device
// memory (LaunchEnv::lr, rewritten by the host before each run), so a
// scheduler's new rate replays the graph unchanged; else the params'.
//
// Launch geometry: 1-D grid-stride loops, 256-thread blocks, grid of
// ceil(n / 256) blocks capped at 32 per SM.
#include "cuda_math.cuh"

namespace switchyard::cuda_impl {
namespace {

struct Lr {
  const float* at;  // device memory, or null: `value`
  float value;
  __device__ float get() const { return at ? *at : value; }
};

__global__ void sgd_k(float* w, const float* g, int64_t n, Lr rate, float wd) {
  const float lr = rate.get();
  SY_GRID_STRIDE(j, n) pointwise::sgd_step(w[j], g[j], lr, wd);
}

__global__ void sgd_momentum_k(float* w, float* buf, const float* g, int64_t n, Lr rate, float mom,
                               float damp, float wd, bool nesterov, bool first) {
  const float lr = rate.get();
  SY_GRID_STRIDE(j, n)
  pointwise::sgd_momentum_step(w[j], buf[j], g[j], lr, mom, damp, wd, nesterov, first);
}

__global__ void adam_k(float* w, float* m, float* v, const float* g, const float* step, int64_t n,
                       Lr rate, float b1, float b2, float eps, float wd, bool decoupled) {
  const float lr = rate.get();
  float t = step[0];
  float bc1 = 1.f - powf(b1, t), bc2 = 1.f - powf(b2, t);
  float stepsize = lr / bc1, inv_sqrt_bc2 = 1.f / sqrtf(bc2);
  float keep = decoupled ? 1.f - lr * wd : 1.f, l2 = decoupled ? 0.f : wd;
  SY_GRID_STRIDE(j, n)
  pointwise::adam_step(w[j], m[j], v[j], g[j], b1, b2, eps, stepsize, inv_sqrt_bc2, keep, l2);
}

constexpr int kMultiTensors = 24;             // the table stays under 1.3 KB of parameters
constexpr int64_t kMultiChunk = kBlock * 16;  // elements per block

struct AdamTable {
  float* w[kMultiTensors];
  float* m[kMultiTensors];
  float* v[kMultiTensors];
  float* step[kMultiTensors];
  const float* g[kMultiTensors];
  int64_t n[kMultiTensors];
  uint32_t first[kMultiTensors + 1];  // each tensor's first block; first[count] = grid
  int count;
};

// One counter per context: correct only while a device runs one
// adam_multi at a time, as its single stream does (cuda_device.h). A second
// stream would need a counter per stream (through LaunchEnv).
__device__ unsigned int g_adam_ticket = 0;

__global__ void adam_multi_k(AdamTable tb, Lr rate, float b1, float b2, float eps, float wd,
                             bool decoupled) {
  const float lr = rate.get();
  int t = 0;
  while (t + 1 < tb.count && blockIdx.x >= tb.first[t + 1]) ++t;
  __shared__ float count;
  if (threadIdx.x == 0) count = tb.step[t][0] + 1.f;
  __syncthreads();
  const float c = count;
  const float bc1 = 1.f - powf(b1, c), bc2 = 1.f - powf(b2, c);
  const float stepsize = lr / bc1, inv_sqrt_bc2 = 1.f / sqrtf(bc2);
  const float keep = decoupled ? 1.f - lr * wd : 1.f, l2 = decoupled ? 0.f : wd;
  const int64_t lo = int64_t(blockIdx.x - tb.first[t]) * kMultiChunk;
  const int64_t hi = lo + kMultiChunk < tb.n[t] ? lo + kMultiChunk : tb.n[t];
  float *w = tb.w[t], *m = tb.m[t], *v = tb.v[t];
  const float* g = tb.g[t];
  for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x)
    pointwise::adam_step(w[j], m[j], v[j], g[j], b1, b2, eps, stepsize, inv_sqrt_bc2, keep, l2);
  if (threadIdx.x == 0) {
    __threadfence();  // this block's read of its count comes first
    if (atomicAdd(&g_adam_ticket, 1u) == gridDim.x - 1) {
      for (int i = 0; i < tb.count; ++i) tb.step[i][0] += 1.f;
      g_adam_ticket = 0;
    }
  }
}

struct SgdTable {
  float* w[kMultiTensors];
  float* buf[kMultiTensors];  // null without momentum
  const float* g[kMultiTensors];
  int64_t n[kMultiTensors];
  uint32_t first[kMultiTensors + 1];
  int count;
};

__global__ void sgd_multi_k(SgdTable tb, Lr rate, float mom, float damp, float wd, bool nesterov,
                            bool first) {
  const float lr = rate.get();
  int t = 0;
  while (t + 1 < tb.count && blockIdx.x >= tb.first[t + 1]) ++t;
  const int64_t lo = int64_t(blockIdx.x - tb.first[t]) * kMultiChunk;
  const int64_t hi = lo + kMultiChunk < tb.n[t] ? lo + kMultiChunk : tb.n[t];
  float *w = tb.w[t], *buf = tb.buf[t];
  const float* g = tb.g[t];
  for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
    if (buf)
      pointwise::sgd_momentum_step(w[j], buf[j], g[j], lr, mom, damp, wd, nesterov, first);
    else
      pointwise::sgd_step(w[j], g[j], lr, wd);
  }
}

// A table's blocks: each of its tensors' first (ceil(n / kMultiChunk) each,
// at least one) into first[], the grid returned.
template <class Table>
unsigned table_blocks(Table& tb, const char* name) {
  uint64_t blocks = 0;
  for (int i = 0; i < tb.count; ++i) {
    tb.first[i] = uint32_t(blocks);
    blocks += tb.n[i] > 0 ? uint64_t((tb.n[i] + kMultiChunk - 1) / kMultiChunk) : 1;
  }
  SY_CHECK(blocks < (uint64_t(1) << 31), name, "expected fewer than 2^31 blocks, found ", blocks);
  tb.first[tb.count] = uint32_t(blocks);
  return unsigned(blocks);
}

}  // namespace

void launch(const SgdMultiParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t T = p.tensors, W = p.has_buf ? 2 : 1, N = (W + 1) * T;
  auto count_of = [&](int64_t i) { return int64_t(reinterpret_cast<uintptr_t>(args[N + i])); };
  for (int64_t t0 = 0; t0 < T; t0 += kMultiTensors) {
    SgdTable tb{};
    tb.count = int(T - t0 < kMultiTensors ? T - t0 : kMultiTensors);
    for (int i = 0; i < tb.count; ++i) {
      const int64_t t = t0 + i;
      tb.w[i] = static_cast<float*>(args[W * t]);
      tb.buf[i] = p.has_buf ? static_cast<float*>(args[W * t + 1]) : nullptr;
      tb.g[i] = static_cast<const float*>(args[W * T + t]);
      tb.n[i] = count_of(W * t);
    }
    SY_LAUNCH(sgd_multi_k, table_blocks(tb, "sgd_multi"), kBlock, env.stream)
    (tb, Lr{env.lr, p.lr}, p.momentum, p.dampening, p.weight_decay, p.nesterov, p.first_step);
    SY_CUDA_LAUNCHED("sgd_multi");
  }
}

void launch(const AdamMultiParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t T = p.tensors;
  auto count_of = [&](int64_t i) { return int64_t(reinterpret_cast<uintptr_t>(args[5 * T + i])); };
  for (int64_t t0 = 0; t0 < T; t0 += kMultiTensors) {
    AdamTable tb{};
    tb.count = int(T - t0 < kMultiTensors ? T - t0 : kMultiTensors);
    for (int i = 0; i < tb.count; ++i) {
      const int64_t t = t0 + i;
      tb.w[i] = static_cast<float*>(args[4 * t]);
      tb.m[i] = static_cast<float*>(args[4 * t + 1]);
      tb.v[i] = static_cast<float*>(args[4 * t + 2]);
      tb.step[i] = static_cast<float*>(args[4 * t + 3]);
      tb.g[i] = static_cast<const float*>(args[4 * T + t]);
      tb.n[i] = count_of(4 * t);
    }
    SY_LAUNCH(adam_multi_k, table_blocks(tb, "adam_multi"), kBlock, env.stream)
    (tb, Lr{env.lr, p.lr}, p.beta1, p.beta2, p.eps, p.weight_decay, p.decoupled);
    SY_CUDA_LAUNCHED("adam_multi");
  }
}

void launch(const SgdParams& p, void* const* args, const LaunchEnv& env) {
  float* w = static_cast<float*>(args[0]);
  const float* g = static_cast<const float*>(args[1]);
  const int64_t n = p.n;
  if (n <= 0) return;
  SY_LAUNCH(sgd_k, blocks_for(n, env), kBlock, env.stream)
  (w, g, n, Lr{env.lr, p.lr}, p.weight_decay);
  SY_CUDA_LAUNCHED("sgd_update");
}

void launch(const SgdMomentumParams& p, void* const* args, const LaunchEnv& env) {
  float* w = static_cast<float*>(args[0]);
  float* buf = static_cast<float*>(args[1]);
  const float* g = static_cast<const float*>(args[2]);
  const int64_t n = p.n;
  if (n <= 0) return;
  SY_LAUNCH(sgd_momentum_k, blocks_for(n, env), kBlock, env.stream)
  (w, buf, g, n, Lr{env.lr, p.lr}, p.momentum, p.dampening, p.weight_decay, p.nesterov,
   p.first_step);
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
  (w, m, v, g, step, n, Lr{env.lr, p.lr}, p.beta1, p.beta2, p.eps, p.weight_decay, p.decoupled);
  SY_CUDA_LAUNCHED("adam_update");
}

}  // namespace switchyard::cuda_impl
