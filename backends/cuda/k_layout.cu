// SPDX-License-Identifier: MIT
// Layout kernels: transpose, pad and expand.
//
// transpose: out[c, r] = in[r, c] for an R x C row-major matrix (R = rows,
//   C = cols) of 8-, 4-, 2- or 1-byte elements (elem_size). 32 x 32 tiles staged
//   through shared memory (padded by one column against bank conflicts) so
//   that reads and writes are both coalesced. Launch: 32 x 8 threads per
//   block, each thread moving 4 elements of a tile; a 2-D grid of tiles,
//   capped at 65535 in y, whose blocks loop over the remaining tile rows.
// pad: out = zeros(total) with out[begin .. begin + len) = in (f32):
//   one grid-stride pass over the output, 256-thread blocks.
// expand: out[o, l, i] = scale * in[o, i] over (outer, len, inner): one
//   grid-stride pass over the output, 256-thread blocks.
#include "cuda_math.cuh"

namespace switchyard::cuda_impl {
namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

template <class T>
__global__ void transpose_k(T* out, const T* in, int64_t R, int64_t C) {
  __shared__ T tile[kTile][kTile + 1];
  int64_t tiles_r = (R + kTile - 1) / kTile;
  int64_t c0 = int64_t(blockIdx.x) * kTile;
  for (int64_t tr = blockIdx.y; tr < tiles_r; tr += gridDim.y) {
    int64_t r0 = tr * kTile;
    for (int j = threadIdx.y; j < kTile; j += kRowsPerPass) {
      int64_t r = r0 + j, c = c0 + threadIdx.x;
      if (r < R && c < C) tile[j][threadIdx.x] = in[r * C + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kRowsPerPass) {
      int64_t c = c0 + j, r = r0 + threadIdx.x;  // out is C x R
      if (c < C && r < R) out[c * R + r] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

__global__ void pad_k(float* out, const float* in, int64_t start, int64_t len, int64_t total) {
  SY_GRID_STRIDE(i, total) out[i] = (i >= start && i < start + len) ? in[i - start] : 0.f;
}

__global__ void expand_k(float* out, const float* in, int64_t len, int64_t inner, int64_t total,
                         float scale) {
  SY_GRID_STRIDE(i, total) {
    int64_t ii = i % inner, o = i / (inner * len);
    out[i] = scale * in[o * inner + ii];
  }
}

}  // namespace

void launch(const TransposeParams& p, void* const* args, const LaunchEnv& env) {
  void* out = args[0];
  const void* in = args[1];
  const int64_t R = p.rows, C = p.cols;
  if (R <= 0 || C <= 0) return;
  int64_t gx = (C + kTile - 1) / kTile, gy = (R + kTile - 1) / kTile;
  SY_CHECK(gx <= 0x7fffffff, "transpose", "expected at most ", int64_t(0x7fffffff) * kTile,
           " columns on CUDA, found ", C);
  dim3 grid(unsigned(gx), unsigned(gy < 65535 ? gy : 65535)), block(kTile, kRowsPerPass);
  if (p.elem_size == 1) {
    auto* o = static_cast<uint8_t*>(out);
    auto* i = static_cast<const uint8_t*>(in);
    SY_LAUNCH(transpose_k, grid, block, env.stream)(o, i, R, C);
  } else if (p.elem_size == 2) {
    auto* o = static_cast<uint16_t*>(out);
    auto* i = static_cast<const uint16_t*>(in);
    SY_LAUNCH(transpose_k, grid, block, env.stream)(o, i, R, C);
  } else if (p.elem_size == 8) {
    auto* o = static_cast<uint64_t*>(out);
    auto* i = static_cast<const uint64_t*>(in);
    SY_LAUNCH(transpose_k, grid, block, env.stream)(o, i, R, C);
  } else {
    auto* o = static_cast<uint32_t*>(out);
    auto* i = static_cast<const uint32_t*>(in);
    SY_LAUNCH(transpose_k, grid, block, env.stream)(o, i, R, C);
  }
  SY_CUDA_LAUNCHED("transpose");
}

void launch(const PadParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const float* in = static_cast<const float*>(args[1]);
  const int64_t total = p.total;
  if (total <= 0) return;
  SY_LAUNCH(pad_k, blocks_for(total, env), kBlock, env.stream)(out, in, p.begin, p.len, total);
  SY_CUDA_LAUNCHED("pad");
}

void launch(const ExpandParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const float* in = static_cast<const float*>(args[1]);
  const int64_t outer = p.outer, len = p.len, inner = p.inner, total = outer * len * inner;
  if (total <= 0) return;
  SY_LAUNCH(expand_k, blocks_for(total, env), kBlock, env.stream)
  (out, in, len, inner, total, p.scale);
  SY_CUDA_LAUNCHED("expand");
}

}  // namespace switchyard::cuda_impl
