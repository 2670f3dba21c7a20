// SPDX-License-Identifier: MIT
// Random fills: rand_uniform and rand_normal, counter-based Philox4x32-10
// (Salmon et al. 2011): the same 32-bit stream as the CPU and Vulkan backends,
// so uniform values match them bit for bit (each step rounded, never
// contracted into an FMA); normal values agree to a few ulps (the device's
// logf/cosf differ from the host's in the last bits, and may be contracted).
// Element k uses counter (k lo, k hi, offset lo, offset hi) and key (seed lo,
// seed hi) = offset, seed; uniform = low + (high - low) * (x0 >> 8) / 2^24,
// normal = mean + std * Box-Muller(x0, x1).
//
// The stream's offset is the params' or, in a CUDA graph, read from device
// memory (LaunchEnv::rng_offset), which the host rewrites before each
// replay: the graph stays the same while every step draws a new stream.
//
// Shapes: a flat f32 output of n elements.
// Launch geometry: a 1-D grid-stride loop, 256-thread blocks, grid of
// ceil(n / 256) capped at 32 blocks per SM.
#include "cuda_math.cuh"

namespace switchyard::cuda_impl {
namespace {

struct U4 {
  uint32_t v[4];
};

__device__ inline U4 philox(U4 c, uint32_t k0, uint32_t k1) {
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0 = __umulhi(0xD2511F53u, c.v[0]), lo0 = 0xD2511F53u * c.v[0];
    uint32_t hi1 = __umulhi(0xCD9E8D57u, c.v[2]), lo1 = 0xCD9E8D57u * c.v[2];
    c = {{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

struct Rng {
  uint32_t k0, k1;
  uint64_t offset;
  const uint64_t* offset_at;  // non-null: the offset is there (device memory)
};

// The launch's generator: its offset read once per thread.
__device__ inline Rng resolve(Rng r) {
  if (r.offset_at) r.offset = *r.offset_at;
  return r;
}

__device__ inline U4 philox_at(const Rng& r, int64_t k) {
  return philox(
      {{uint32_t(k), uint32_t(uint64_t(k) >> 32), uint32_t(r.offset), uint32_t(r.offset >> 32)}},
      r.k0, r.k1);
}

constexpr float kTwoPow24 = 1.0f / 16777216.0f;

__global__ void rand_uniform_k(float* out, int64_t n, Rng rng, float lo, float span) {
  const Rng r = resolve(rng);
  // Rounded step by step, as the CPU computes it: nvcc would otherwise
  // contract the multiply and add into one FMA (one rounding, not two) and
  // the values would differ from the CPU's in the last bit.
  SY_GRID_STRIDE(i, n)
  out[i] = __fadd_rn(lo, __fmul_rn(__fmul_rn(span, float(philox_at(r, i).v[0] >> 8)), kTwoPow24));
}

// u exactly as rand_uniform_k's with low 0 and span 1.
__global__ void dropout_k(float* out, const float* x, int64_t n, Rng rng, float p, float scale) {
  const Rng r = resolve(rng);
  SY_GRID_STRIDE(i, n) {
    const float u = __fmul_rn(float(philox_at(r, i).v[0] >> 8), kTwoPow24);
    out[i] = x[i] * (u >= p ? scale : 0.f);
  }
}

__global__ void rand_normal_k(float* out, int64_t n, Rng rng, float mean, float std) {
  const Rng r = resolve(rng);
  SY_GRID_STRIDE(i, n) {
    U4 x = philox_at(r, i);
    float u1 = float((x.v[0] >> 8) + 1) * kTwoPow24;  // (0, 1]
    float u2 = float(x.v[1] >> 8) * kTwoPow24;
    out[i] = mean + std * sqrtf(-2.f * logf(u1)) * cosf(6.283185307179586f * u2);
  }
}

}  // namespace

void launch(const RandUniformParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const int64_t n = p.n;
  if (n <= 0) return;
  const Rng r{uint32_t(p.seed), uint32_t(p.seed >> 32), p.offset, env.rng_offset};
  SY_LAUNCH(rand_uniform_k, blocks_for(n, env), kBlock, env.stream)
  (out, n, r, p.low, p.high - p.low);
  SY_CUDA_LAUNCHED("rand_uniform");
}

void launch(const DropoutParams& p, void* const* args, const LaunchEnv& env) {
  if (p.n <= 0) return;
  const Rng r{uint32_t(p.seed), uint32_t(p.seed >> 32), p.offset, env.rng_offset};
  SY_LAUNCH(dropout_k, blocks_for(p.n, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]), p.n, r, p.p, p.scale);
  SY_CUDA_LAUNCHED("dropout");
}

void launch(const RandNormalParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const int64_t n = p.n;
  if (n <= 0) return;
  const Rng r{uint32_t(p.seed), uint32_t(p.seed >> 32), p.offset, env.rng_offset};
  SY_LAUNCH(rand_normal_k, blocks_for(n, env), kBlock, env.stream)(out, n, r, p.mean, p.std);
  SY_CUDA_LAUNCHED("rand_normal");
}

}  // namespace switchyard::cuda_impl
