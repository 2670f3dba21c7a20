// Layout kernels: transpose, pad and expand.
//
// transpose: out[c, r] = in[r, c] for an R x C row-major matrix (R = p.i[0],
//   C = p.i[1]) of 4-byte or 1-byte elements (p.i[2]). 32 x 32 tiles staged
//   through shared memory (padded by one column against bank conflicts) so
//   that reads and writes are both coalesced. Launch: 32 x 8 threads per
//   block, each thread moving 4 elements of a tile; a 2-D grid of tiles,
//   capped at 65535 in y, whose blocks loop over the remaining tile rows.
// pad: out = zeros(p.i[2]) with out[p.i[0] .. p.i[0] + p.i[1]) = in (f32):
//   one grid-stride pass over the output, 256-thread blocks.
// expand: out[o, l, i] = p.f[0] * in[o, i] with (outer, len, inner) =
//   p.i[0..2]: one grid-stride pass over the output, 256-thread blocks.
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

__global__ void expand_k(float* out, const float* in, int64_t len, int64_t inner, int64_t total, float scale) {
  SY_GRID_STRIDE(i, total) {
    int64_t ii = i % inner, o = i / (inner * len);
    out[i] = scale * in[o * inner + ii];
  }
}

}  // namespace

void launch_transpose(const KernelParams& p, void* out, const void* in, const LaunchEnv& env) {
  int64_t R = p.i[0], C = p.i[1];
  if (R <= 0 || C <= 0) return;
  int64_t gx = (C + kTile - 1) / kTile, gy = (R + kTile - 1) / kTile;
  SY_CHECK(gx <= 0x7fffffff, "transpose", "expected at most ", int64_t(0x7fffffff) * kTile,
           " columns on CUDA, found ", C);
  dim3 grid(unsigned(gx), unsigned(gy < 65535 ? gy : 65535)), block(kTile, kRowsPerPass);
  if (p.i[2] == 1)
    SY_LAUNCH(transpose_k, grid, block, env.stream)(static_cast<uint8_t*>(out), static_cast<const uint8_t*>(in), R, C);
  else
    SY_LAUNCH(transpose_k, grid, block, env.stream)(static_cast<uint32_t*>(out), static_cast<const uint32_t*>(in), R, C);
  SY_CUDA_LAUNCHED("transpose");
}

void launch_pad(const KernelParams& p, float* out, const float* in, const LaunchEnv& env) {
  int64_t total = p.i[2];
  if (total <= 0) return;
  SY_LAUNCH(pad_k, blocks_for(total, env), kBlock, env.stream)(out, in, p.i[0], p.i[1], total);
  SY_CUDA_LAUNCHED("pad");
}

void launch_expand(const KernelParams& p, float* out, const float* in, const LaunchEnv& env) {
  int64_t outer = p.i[0], len = p.i[1], inner = p.i[2], total = outer * len * inner;
  if (total <= 0) return;
  SY_LAUNCH(expand_k, blocks_for(total, env), kBlock, env.stream)(out, in, len, inner, total, p.f[0]);
  SY_CUDA_LAUNCHED("expand");
}

}  // namespace switchyard::cuda_impl
