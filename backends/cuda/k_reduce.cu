// SPDX-License-Identifier: MIT
// reduce_sum: out[o, i] = scale * sum_l in[o, l, i], over (outer, len,
// inner). Sums are accumulated in double, as on the CPU (the
// reduction is bound by memory bandwidth, not by FP64 throughput).
//
// Launch geometry, by shape:
// - inner == 1 (row sums), len <= 4096: one warp per row, 8 rows per
//   256-thread block; lanes stride the row, then a shuffle reduction.
// - inner == 1, longer rows: one 256-thread block per row, a shuffle
//   reduction per warp and one across the 8 warps in shared memory.
// - Long rows too few to fill the GPU (a whole-tensor sum is one row: it
//   ran on one block): each row is split into parts of at least 4096, a
//   block per (part, row) writes its sum to env.scratch in double, and the
//   second kernel below adds the parts per row in order.
// - inner > 1 (column sums): 32 x 8 blocks; the 32 threads in x take 32
//   adjacent columns (coalesced), the 8 in y split the len axis, and the 8
//   partial sums meet in shared memory. Grid: ceil(inner / 32) x outer.
// - Column sums whose grid would leave most of the GPU idle (a bias
//   gradient: outer 1, inner 128, len 65536 is 4 blocks) and whose len is
//   long: len is split into `splits` parts of at least 256 (grid z), each
//   part's sums go to env.scratch in double, and a second kernel adds the
//   parts per output in order: deterministic, no atomics.
// Grids are capped (65535 in y, 32 blocks per SM in x) and loop.
#include "cuda_math.cuh"

namespace switchyard::cuda_impl {
namespace {

constexpr int kWarps = 8;

__global__ void row_sum_warp_k(float* out, const float* in, int64_t rows, int64_t len,
                               float scale) {
  int lane = threadIdx.x & 31;
  int64_t first = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  for (int64_t r = first; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const float* x = in + r * len;
    double s = 0;
    for (int64_t l = lane; l < len; l += 32) s += x[l];
    s = warp_sum(s);
    if (lane == 0) out[r] = float(s) * scale;
  }
}

// The sum of x[l0, l1) over the block (a shuffle reduction per warp, then
// one across the 8 warps through sh), valid in thread 0. Called by every
// thread of the block; sh may be reused as soon as it returns.
__device__ inline double block_row_sum(const float* x, int64_t l0, int64_t l1, double* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double s = 0;
  for (int64_t l = l0 + threadIdx.x; l < l1; l += blockDim.x) s += x[l];
  s = warp_sum(s);
  if (lane == 0) sh[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < kWarps ? sh[lane] : 0.0;
    s = warp_sum(s);
  }
  __syncthreads();
  return s;
}

__global__ void row_sum_block_k(float* out, const float* in, int64_t rows, int64_t len,
                                float scale) {
  __shared__ double sh[kWarps];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const double s = block_row_sum(in + r * len, 0, len, sh);
    if (threadIdx.x == 0) out[r] = float(s) * scale;
  }
}

__global__ void col_sum_k(float* out, const float* in, int64_t outer, int64_t len, int64_t inner,
                          float scale) {
  __shared__ double part[kWarps][33];
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    for (int64_t i0 = int64_t(blockIdx.x) * 32; i0 < inner; i0 += int64_t(gridDim.x) * 32) {
      int64_t i = i0 + threadIdx.x;
      double s = 0;
      if (i < inner)
        for (int64_t l = threadIdx.y; l < len; l += kWarps) s += in[(o * len + l) * inner + i];
      part[threadIdx.y][threadIdx.x] = s;
      __syncthreads();
      if (threadIdx.y == 0 && i < inner) {
        double t = 0;
        for (int w = 0; w < kWarps; ++w) t += part[w][threadIdx.x];
        out[o * inner + i] = float(t) * scale;
      }
      __syncthreads();
    }
  }
}

// Part z of a split column sum: part[(z * outer + o) * inner + i] = the sum
// over l in [z * chunk, (z + 1) * chunk) of in[o, l, i].
__global__ void col_sum_part_k(double* part, const float* in, int64_t outer, int64_t len,
                               int64_t inner, int64_t chunk) {
  __shared__ double sh[kWarps][33];
  const int64_t l0 = int64_t(blockIdx.z) * chunk, l1 = l0 + chunk < len ? l0 + chunk : len;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    for (int64_t i0 = int64_t(blockIdx.x) * 32; i0 < inner; i0 += int64_t(gridDim.x) * 32) {
      int64_t i = i0 + threadIdx.x;
      double s = 0;
      if (i < inner)
        for (int64_t l = l0 + threadIdx.y; l < l1; l += kWarps) s += in[(o * len + l) * inner + i];
      sh[threadIdx.y][threadIdx.x] = s;
      __syncthreads();
      if (threadIdx.y == 0 && i < inner) {
        double t = 0;
        for (int w = 0; w < kWarps; ++w) t += sh[w][threadIdx.x];
        part[(int64_t(blockIdx.z) * outer + o) * inner + i] = t;
      }
      __syncthreads();
    }
  }
}

// Part z of split row sums: part[z * rows + r] = the sum over l in
// [z * chunk, (z + 1) * chunk) of in[r, l].
__global__ void row_sum_part_k(double* part, const float* in, int64_t rows, int64_t len,
                               int64_t chunk) {
  __shared__ double sh[kWarps];
  const int64_t l0 = int64_t(blockIdx.x) * chunk, l1 = l0 + chunk < len ? l0 + chunk : len;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const double s = block_row_sum(in + r * len, l0, l1, sh);
    if (threadIdx.x == 0) part[int64_t(blockIdx.x) * rows + r] = s;
  }
}

// out[j] = scale * the parts' sum for output j, parts added in order.
__global__ void col_sum_finish_k(float* out, const double* part, int64_t n, int splits,
                                 float scale) {
  SY_GRID_STRIDE(j, n) {
    double t = 0;
    for (int z = 0; z < splits; ++z) t += part[int64_t(z) * n + j];
    out[j] = float(t) * scale;
  }
}

// How many parts a column sum's len is split into (1: not split): enough
// that the grid reaches about twice the device's resident blocks, each part
// at least kMinPart long, all partials fitting in env.scratch.
constexpr int64_t kMinPart = 256;
int col_sum_splits(int64_t outer, int64_t len, int64_t inner, const LaunchEnv& env) {
  const int64_t base = (inner + 31) / 32 * (outer < 65535 ? outer : 65535);
  int64_t want = (2 * env.max_blocks + base - 1) / base;
  int64_t s = want < len / kMinPart ? want : len / kMinPart;
  const int64_t fit = int64_t(env.scratch_bytes / sizeof(double)) / (outer * inner);
  if (s > fit) s = fit;
  if (s > 65535) s = 65535;
  return s >= 2 ? int(s) : 1;
}

// How many parts each of `rows` long rows is split into (1: not split):
// enough that the grid reaches about twice the device's resident blocks,
// each part at least kMinRowPart long, all partials fitting in env.scratch.
constexpr int64_t kMinRowPart = 4096;
int row_sum_splits(int64_t rows, int64_t len, const LaunchEnv& env) {
  int64_t s = (2 * env.max_blocks + rows - 1) / rows;
  if (s > len / kMinRowPart) s = len / kMinRowPart;
  const int64_t fit = int64_t(env.scratch_bytes / sizeof(double)) / rows;
  if (s > fit) s = fit;
  if (s > 65535) s = 65535;
  return s >= 2 ? int(s) : 1;
}

}  // namespace

void launch(const ReduceSumParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const float* in = static_cast<const float*>(args[1]);
  const int64_t outer = p.outer, len = p.len, inner = p.inner;
  if (outer <= 0 || inner <= 0) return;
  if (len <= 0) {  // an empty sum
    FillParams f;
    f.n = outer * inner;
    f.dtype = DType::f32;
    void* fill_args[1] = {out};
    launch(f, fill_args, env);
    return;
  }
  if (inner == 1 && len <= 4096) {
    SY_LAUNCH(row_sum_warp_k, blocks_for(outer, env, kWarps), kWarps * 32, env.stream)
    (out, in, outer, len, p.scale);
  } else if (int splits = inner == 1 ? row_sum_splits(outer, len, env) : 1; splits > 1) {
    double* part = static_cast<double*>(env.scratch);
    const int64_t chunk = (len + splits - 1) / splits;
    dim3 grid(unsigned(splits), unsigned(outer < 65535 ? outer : 65535));
    SY_LAUNCH(row_sum_part_k, grid, kWarps * 32, env.stream)(part, in, outer, len, chunk);
    SY_CUDA_LAUNCHED("reduce_sum");
    SY_LAUNCH(col_sum_finish_k, blocks_for(outer, env), kBlock, env.stream)
    (out, part, outer, splits, p.scale);
  } else if (inner == 1) {
    SY_LAUNCH(row_sum_block_k, blocks_for(outer, env, 1), kWarps * 32, env.stream)
    (out, in, outer, len, p.scale);
  } else if (int splits = col_sum_splits(outer, len, inner, env); splits > 1) {
    double* part = static_cast<double*>(env.scratch);
    const int64_t chunk = (len + splits - 1) / splits;
    dim3 grid(blocks_for(inner, env, 32), unsigned(outer < 65535 ? outer : 65535),
              unsigned(splits));
    SY_LAUNCH(col_sum_part_k, grid, dim3(32, kWarps), env.stream)
    (part, in, outer, len, inner, chunk);
    SY_CUDA_LAUNCHED("reduce_sum");
    SY_LAUNCH(col_sum_finish_k, blocks_for(outer * inner, env), kBlock, env.stream)
    (out, part, outer * inner, splits, p.scale);
  } else {
    dim3 grid(blocks_for(inner, env, 32), unsigned(outer < 65535 ? outer : 65535));
    SY_LAUNCH(col_sum_k, grid, dim3(32, kWarps), env.stream)(out, in, outer, len, inner, p.scale);
  }
  SY_CUDA_LAUNCHED("reduce_sum");
}

}  // namespace switchyard::cuda_impl
