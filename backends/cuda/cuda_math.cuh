// Device-side helpers shared by the kernel files: grid sizing for
// grid-stride loops, warp reductions, and the pointwise math of the Unary and
// Binary codes (the same formulas as the CPU reference, in float).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.h"
#include "cuda_kernels.h"

namespace switchyard::cuda_impl {

constexpr int kBlock = 256;  // threads per block for elementwise kernels

// Blocks for n items at kBlock per block, capped: the kernels loop.
inline unsigned blocks_for(int64_t n, const LaunchEnv& env, int block = kBlock) {
  int64_t b = (n + block - 1) / block;
  if (b > env.max_blocks) b = env.max_blocks;
  return unsigned(b < 1 ? 1 : b);
}

// for (i = global thread id; i < n; i += total threads)
#define SY_GRID_STRIDE(i, n)                                                       \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);         \
       i += int64_t(gridDim.x) * blockDim.x)

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi); GELU is the tanh form

__device__ inline float unary_apply(Unary op, float x) {
  switch (op) {
    case Unary::relu: return x > 0.f ? x : 0.f;
    case Unary::gelu: return 0.5f * x * (1.f + tanhf(kGeluC * (x + 0.044715f * x * x * x)));
    case Unary::tanh: return tanhf(x);
    case Unary::sigmoid: return 1.f / (1.f + expf(-x));
    case Unary::exp: return expf(x);
    case Unary::log: return logf(x);
    case Unary::neg: return -x;
    case Unary::sqrt: return sqrtf(x);
    case Unary::square: return x * x;
    case Unary::abs: return fabsf(x);
    case Unary::none: return x;
  }
  return x;
}

// d op(x) / dx, given x and y = op(x).
__device__ inline float unary_grad(Unary op, float x, float y) {
  switch (op) {
    case Unary::relu: return x > 0.f ? 1.f : 0.f;
    case Unary::gelu: {
      float t = tanhf(kGeluC * (x + 0.044715f * x * x * x));
      return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluC * (1.f + 3.f * 0.044715f * x * x);
    }
    case Unary::tanh: return 1.f - y * y;
    case Unary::sigmoid: return y * (1.f - y);
    case Unary::exp: return y;
    case Unary::log: return 1.f / x;
    case Unary::neg: return -1.f;
    case Unary::sqrt: return 0.5f / y;
    case Unary::square: return 2.f * x;
    case Unary::abs: return x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f);
    case Unary::none: return 1.f;
  }
  return 0.f;
}

__device__ inline float binary_apply(Binary op, float a, float b) {
  switch (op) {
    case Binary::add: return a + b;
    case Binary::sub: return a - b;
    case Binary::mul: return a * b;
    case Binary::div: return a / b;
    case Binary::max: return a < b ? b : a;  // std::max's NaN and signed-zero behaviour
    case Binary::min: return b < a ? b : a;
    case Binary::eq: return a == b ? 1.f : 0.f;
  }
  return 0.f;
}

}  // namespace switchyard::cuda_impl
