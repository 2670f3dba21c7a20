// SPDX-License-Identifier: MIT
// Device-side helpers shared by the kernel files: the launch macro, grid
// sizing for grid-stride loops, warp reductions, and the pointwise math of the
// Unary and Binary codes (pointwise.h, the CPU backend's own formulas).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.h"
#include "cuda_kernels.h"
#include "pointwise.h"

// SY_LAUNCH(kernel, grid, block, stream)(args...): a kernel launch. Under
// SY_CUDA_EMULATION (tests/cuda_emu) the same kernels run on CPU threads, so
// their index math is tested where no GPU is.
#ifdef SY_CUDA_EMULATION
#define SY_LAUNCH(kernel, grid, block, stream) \
  (::sy_emu::Launch(grid, block, stream)->*[](auto... sy_args) { kernel(sy_args...); })
#else
#define SY_LAUNCH(kernel, grid, block, stream) kernel<<<grid, block, 0, stream>>>
#endif

namespace switchyard::cuda_impl {

constexpr int kBlock = 256;  // threads per block for elementwise kernels

// Blocks for n items at kBlock per block, capped: the kernels loop.
inline unsigned blocks_for(int64_t n, const LaunchEnv& env, int block = kBlock) {
  int64_t b = (n + block - 1) / block;
  if (b > env.max_blocks) b = env.max_blocks;
  return unsigned(b < 1 ? 1 : b);
}

// for (i = global thread id; i < n; i += total threads)
#define SY_GRID_STRIDE(i, n)                                                \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
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

// The pointwise math, shared with the CPU backend (pointwise.h).
__device__ inline float unary_apply(Unary op, float x) { return pointwise::unary(op, x); }
__device__ inline float unary_grad(Unary op, float x, float y) {
  return pointwise::unary_grad(op, x, y);
}
__device__ inline float binary_apply(Binary op, float a, float b) {
  return pointwise::binary(op, a, b);
}

}  // namespace switchyard::cuda_impl
