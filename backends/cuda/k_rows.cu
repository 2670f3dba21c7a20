// SPDX-License-Identifier: MIT
// Row-wise kernels over a rows x cols row-major f32 matrix: softmax /
// log_softmax (`log`), their backward,
// cross-entropy loss and its backward, and argmax.
//
// Launch geometry: one warp per row, 8 rows per 256-thread block; lanes
// stride the row once, keeping a running max and sum of exp(x - max) (the
// online softmax: the row is read once for both, then once to write), and
// meet through shuffles. The grid is ceil(rows / 8) blocks, capped at 32
// per SM, and loops. Softmax rows over 1,024 long and too few to fill the
// GPU take a 256-thread block each instead.
// cross_entropy's mean over rows uses the same grid: each block sums its
// warps' rows in double and writes one partial to env.scratch, and a
// second, one-block kernel adds the partials in order (a grid of one block
// writes the loss itself). The loss is written once, without atomics, the
// same on every run of a given device.
//
// Labels outside [0, cols) are reported in the status words (the first one
// wins, device-scope atomicCAS); that row's loss and gradient become NaN and
// the host raises the error at the next synchronize.
#include <cmath>

#include "cuda_math.cuh"

namespace switchyard::cuda_impl {
namespace {

constexpr int kRowsPerBlock = 8;

__device__ inline void report_label(DeviceStatus* st, Kernel k, int64_t row, int32_t label,
                                    int64_t cols) {
  if (atomicCAS(&st->code, 0, -1) == 0) {  // claimed; publish the fields, then the code
    st->kernel = int32_t(k);
    st->row = int32_t(row);
    st->value = label;
    st->bound = int32_t(cols);
    __threadfence();
    atomicExch(&st->code, 1);
  }
}

// One more element into a running (max, sum of exp(x - max)): the online
// softmax's update, so a row is read once for both. A -inf element adds
// nothing (not exp(-inf - -inf), a NaN, while the max is still -inf).
__device__ inline void online_add(float x, float& m, float& s) {
  if (x > m) {
    s = s * expf(m - x) + 1.f;
    m = x;
  } else if (m != -INFINITY) {
    s += expf(x - m);
  }
}

// Two running (max, sum)s merged: the sum rescaled to the larger max.
__device__ inline void online_merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;  // both empty (or all -inf)
  s = (m == -INFINITY ? 0.f : s * expf(m - mm)) + (m2 == -INFINITY ? 0.f : s2 * expf(m2 - mm));
  m = mm;
}

// The lanes' running (max, sum)s merged across the warp (every lane gets
// the result).
__device__ inline void warp_online_merge(float& m, float& s) {
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    online_merge(m, s, m2, s2);
  }
}

// Row max and sum of exp(x - max), across the warp, in one read of the row.
__device__ inline void row_stats(const float* x, int64_t cols, int lane, float& m, float& s) {
  m = -INFINITY;
  s = 0.f;
  for (int64_t c = lane; c < cols; c += 32) online_add(x[c], m, s);
  warp_online_merge(m, s);
}

#define SY_FOR_ROWS(r, rows)                                                             \
  for (int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5); r < (rows); \
       r += int64_t(gridDim.x) * kRowsPerBlock)

__global__ void softmax_k(float* out, const float* in, int64_t rows, int64_t cols, bool log_out) {
  int lane = threadIdx.x & 31;
  SY_FOR_ROWS(r, rows) {
    const float* x = in + r * cols;
    float* y = out + r * cols;
    float m, s;
    row_stats(x, cols, lane, m, s);
    if (log_out) {
      float lse = m + logf(s);
      for (int64_t c = lane; c < cols; c += 32) y[c] = x[c] - lse;
    } else {
      float inv = 1.f / s;
      for (int64_t c = lane; c < cols; c += 32) y[c] = expf(x[c] - m) * inv;
    }
  }
}

// Long rows too few for a warp each to fill the GPU: a block per row, the
// (max, sum) merged across its 8 warps in shared memory.
__global__ void softmax_block_k(float* out, const float* in, int64_t rows, int64_t cols,
                                bool log_out) {
  __shared__ float wm[kRowsPerBlock], ws[kRowsPerBlock];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = in + r * cols;
    float* y = out + r * cols;
    float m = -INFINITY, s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) online_add(x[c], m, s);
    warp_online_merge(m, s);
    if (lane == 0) wm[warp] = m, ws[warp] = s;
    __syncthreads();
    m = wm[0], s = ws[0];
    for (int w = 1; w < kRowsPerBlock; ++w) online_merge(m, s, wm[w], ws[w]);  // in order
    if (log_out) {
      const float lse = m + logf(s);
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[c] = x[c] - lse;
    } else {
      const float inv = 1.f / s;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[c] = expf(x[c] - m) * inv;
    }
    __syncthreads();  // wm, ws reused by the next row
  }
}

__global__ void softmax_backward_k(float* dx, const float* dy, const float* y, int64_t rows,
                                   int64_t cols, bool log_out) {
  int lane = threadIdx.x & 31;
  SY_FOR_ROWS(r, rows) {
    const float *g = dy + r * cols, *yr = y + r * cols;
    float* d = dx + r * cols;
    float s = 0.f;
    if (log_out) {
      for (int64_t c = lane; c < cols; c += 32) s += g[c];
      s = warp_sum(s);
      for (int64_t c = lane; c < cols; c += 32) d[c] = g[c] - expf(yr[c]) * s;
    } else {
      for (int64_t c = lane; c < cols; c += 32) s += g[c] * yr[c];
      s = warp_sum(s);
      for (int64_t c = lane; c < cols; c += 32) d[c] = yr[c] * (g[c] - s);
    }
  }
}

// Block b's share of the loss: the sum over its warps' rows of
// logsumexp(x_r) - x_r[label_r], into part[b], or, with one block, the mean
// straight into loss[0].
__global__ void cross_entropy_k(float* loss, double* part, const float* in, const int32_t* labels,
                                int64_t rows, int64_t cols, DeviceStatus* st) {
  __shared__ double warps[kRowsPerBlock];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double acc = 0;
  SY_FOR_ROWS(r, rows) {
    const float* x = in + r * cols;
    float m, s;
    row_stats(x, cols, lane, m, s);
    int32_t l = labels[r];
    if (l < 0 || l >= cols) {
      if (lane == 0) report_label(st, Kernel::cross_entropy, r, l, cols);
      acc += NAN;
    } else {
      acc += double(m) + log(double(s)) - double(x[l]);
    }
  }
  if (lane == 0) warps[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (int w = 0; w < kRowsPerBlock; ++w) t += warps[w];
    if (gridDim.x == 1)
      loss[0] = float(t / double(rows));
    else
      part[blockIdx.x] = t;
  }
}

constexpr int kFinishThreads = 256;

// loss[0] = the partials' sum / rows, added in a fixed order.
__global__ void __launch_bounds__(kFinishThreads)
    cross_entropy_finish_k(float* loss, const double* part, int n, int64_t rows) {
  __shared__ double sh[kFinishThreads / 32];
  double t = 0;
  for (int j = threadIdx.x; j < n; j += kFinishThreads) t += part[j];
  t = warp_sum(t);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = t;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0;
    for (int w = 0; w < kFinishThreads / 32; ++w) s += sh[w];
    loss[0] = float(s / double(rows));
  }
}

__global__ void cross_entropy_backward_k(float* dx, const float* in, const int32_t* labels,
                                         const float* dloss, int64_t rows, int64_t cols,
                                         DeviceStatus* st) {
  int lane = threadIdx.x & 31;
  float scale = dloss[0] / float(rows);
  SY_FOR_ROWS(r, rows) {
    const float* x = in + r * cols;
    float* d = dx + r * cols;
    int32_t l = labels[r];
    bool bad = l < 0 || l >= cols;
    if (bad && lane == 0) report_label(st, Kernel::cross_entropy_backward, r, l, cols);
    float m, s;
    row_stats(x, cols, lane, m, s);
    float inv = 1.f / s;
    for (int64_t c = lane; c < cols; c += 32)
      d[c] = bad ? NAN : expf(x[c] - m) * inv * scale - (c == l ? scale : 0.f);
  }
}

__global__ void argmax_k(int32_t* out, const float* in, int64_t rows, int64_t cols) {
  int lane = threadIdx.x & 31;
  const int none = 0x7fffffff;  // "no element yet": loses to any candidate
  SY_FOR_ROWS(r, rows) {
    const float* x = in + r * cols;
    float best = 0.f;
    int at = none;
    // Ascending: the first max of this lane's numbers. NaNs are skipped (a
    // lane whose first element is NaN would otherwise never move on);
    // std::max_element's answer for a row starting with NaN, 0, is applied
    // at the end.
    for (int64_t c = lane; c < cols; c += 32)
      if (!isnan(x[c]) && (at == none || x[c] > best)) {
        best = x[c];
        at = int(c);
      }
    for (int o = 16; o > 0; o >>= 1) {  // the larger value; on a tie the smaller index
      float ob = __shfl_xor_sync(0xffffffffu, best, o);
      int oa = __shfl_xor_sync(0xffffffffu, at, o);
      if (oa != none && (at == none || ob > best || (ob == best && oa < at))) {
        best = ob;
        at = oa;
      }
    }
    if (lane == 0) out[r] = at == none || isnan(x[0]) ? 0 : at;
  }
}

unsigned row_blocks(int64_t rows, const LaunchEnv& env) {
  return blocks_for(rows, env, kRowsPerBlock);
}
constexpr int kRowThreads = kRowsPerBlock * 32;

}  // namespace

void launch(const SoftmaxParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const float* in = static_cast<const float*>(args[1]);
  const int64_t rows = p.rows, cols = p.cols;
  if (rows <= 0 || cols <= 0) return;
  // A warp per row; a block per row when rows are long (over 1,024) and
  // too few for the warps' blocks (8 rows each) to fill the GPU.
  if (cols > 1024 && rows < 2 * env.max_blocks) {
    const unsigned blocks = unsigned(rows < env.max_blocks ? rows : env.max_blocks);
    SY_LAUNCH(softmax_block_k, blocks, kRowThreads, env.stream)(out, in, rows, cols, p.log);
  } else {
    SY_LAUNCH(softmax_k, row_blocks(rows, env), kRowThreads, env.stream)
    (out, in, rows, cols, p.log);
  }
  SY_CUDA_LAUNCHED("softmax");
}

void launch(const SoftmaxBackwardParams& p, void* const* args, const LaunchEnv& env) {
  float* dx = static_cast<float*>(args[0]);
  const float* dy = static_cast<const float*>(args[1]);
  const float* y = static_cast<const float*>(args[2]);
  const int64_t rows = p.rows, cols = p.cols;
  if (rows <= 0 || cols <= 0) return;
  SY_LAUNCH(softmax_backward_k, row_blocks(rows, env), kRowThreads, env.stream)
  (dx, dy, y, rows, cols, p.log);
  SY_CUDA_LAUNCHED("softmax_backward");
}

void launch(const CrossEntropyParams& p, void* const* args, const LaunchEnv& env) {
  float* loss = static_cast<float*>(args[0]);
  const float* x = static_cast<const float*>(args[1]);
  const int32_t* labels = static_cast<const int32_t*>(args[2]);
  const int64_t rows = p.rows, cols = p.cols;
  if (rows <= 0) return;
  // Partials for at most as many blocks as the scratch holds.
  const unsigned cap = unsigned(env.scratch_bytes / sizeof(double));
  unsigned blocks = row_blocks(rows, env);
  if (blocks > cap) blocks = cap > 0 ? cap : 1;
  double* part = static_cast<double*>(env.scratch);
  SY_LAUNCH(cross_entropy_k, blocks, kRowThreads, env.stream)
  (loss, part, x, labels, rows, cols, env.status);
  SY_CUDA_LAUNCHED("cross_entropy");
  if (blocks > 1) {
    SY_LAUNCH(cross_entropy_finish_k, 1, kFinishThreads, env.stream)(loss, part, int(blocks), rows);
    SY_CUDA_LAUNCHED("cross_entropy");
  }
}

void launch(const CrossEntropyBackwardParams& p, void* const* args, const LaunchEnv& env) {
  float* dx = static_cast<float*>(args[0]);
  const float* x = static_cast<const float*>(args[1]);
  const int32_t* labels = static_cast<const int32_t*>(args[2]);
  const float* dloss = static_cast<const float*>(args[3]);
  const int64_t rows = p.rows, cols = p.cols;
  if (rows <= 0 || cols <= 0) return;
  SY_LAUNCH(cross_entropy_backward_k, row_blocks(rows, env), kRowThreads, env.stream)
  (dx, x, labels, dloss, rows, cols, env.status);
  SY_CUDA_LAUNCHED("cross_entropy_backward");
}

void launch(const ArgmaxParams& p, void* const* args, const LaunchEnv& env) {
  int32_t* out = static_cast<int32_t*>(args[0]);
  const float* x = static_cast<const float*>(args[1]);
  const int64_t rows = p.rows, cols = p.cols;
  if (rows <= 0 || cols <= 0) return;
  SY_LAUNCH(argmax_k, row_blocks(rows, env), kRowThreads, env.stream)(out, x, rows, cols);
  SY_CUDA_LAUNCHED("argmax");
}

// ---- embedding ----------------------------------------------------------------

namespace {

__global__ void embedding_k(float* out, const float* w, const int32_t* idx, int64_t n, int64_t num,
                            int64_t D, DeviceStatus* st) {
  SY_GRID_STRIDE(k, n * D) {
    const int64_t i = k / D;
    const int32_t v = idx[i];
    if (v < 0 || v >= num) {
      report_label(st, Kernel::embedding, i, v, num);
      out[k] = NAN;
    } else {
      out[k] = w[v * D + k % D];
    }
  }
}

// One thread per (range of rows, column): zero its rows, then add the rows
// of dy whose index falls in its range, in index order (no atomics).
__global__ void embedding_backward_k(float* dw, const float* dy, const int32_t* idx, int64_t n,
                                     int64_t num, int64_t D, int64_t ranges) {
  const int64_t per = (num + ranges - 1) / ranges;
  SY_GRID_STRIDE(k, ranges * D) {
    const int64_t d = k % D, v0 = k / D * per, v1 = v0 + per < num ? v0 + per : num;
    for (int64_t v = v0; v < v1; ++v) dw[v * D + d] = 0.f;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = idx[i];
      if (v >= v0 && v < v1) dw[v * D + d] += dy[i * D + d];
    }
  }
}

}  // namespace

void launch(const EmbeddingParams& p, void* const* args, const LaunchEnv& env) {
  if (p.n <= 0 || p.dim <= 0) return;
  SY_LAUNCH(embedding_k, blocks_for(p.n * p.dim, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]),
   static_cast<const int32_t*>(args[2]), p.n, p.num, p.dim, env.status);
  SY_CUDA_LAUNCHED("embedding");
}

void launch(const EmbeddingBackwardParams& p, void* const* args, const LaunchEnv& env) {
  if (p.num <= 0 || p.dim <= 0 || p.ranges <= 0) return;
  SY_LAUNCH(embedding_backward_k, blocks_for(p.ranges * p.dim, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]),
   static_cast<const int32_t*>(args[2]), p.n, p.num, p.dim, p.ranges);
  SY_CUDA_LAUNCHED("embedding_backward");
}

}  // namespace switchyard::cuda_impl
