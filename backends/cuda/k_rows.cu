// SPDX-License-Identifier: MIT
// Row-wise kernels over a rows x cols row-major f32 matrix: softmax /
// log_softmax (`log`), their backward,
// cross-entropy loss and its backward, and argmax.
//
// Launch geometry: one warp per row, 8 rows per 256-thread block; lanes
// stride the row once, keeping a running max and sum of exp(x - max) (the
// online softmax: the row is read once for both, then once to write), and
// meet through shuffles. The grid is ceil(rows / 8) blocks, capped at 32
// per SM, and loops. Softmax rows (forward and backward) over 1,024 long
// and too few to fill the GPU take a 256-thread block each instead. Where
// every row of every argument starts on 16 bytes (cols a multiple of 4,
// aligned tensors) softmax and its backward read and write float4s.
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
#include <cstdint>
#include <initializer_list>

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

// Elements t, t + step, ... of a row of `cols`: f(value) for each, read as
// float4s when V4 (cols a multiple of 4 and the row 16-byte aligned: one
// 16-byte load per lane per step instead of four 4-byte ones).
template <bool V4, class F>
__device__ inline void row_read(const float* x, int64_t cols, int64_t t, int64_t step, F&& f) {
  if constexpr (V4) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (int64_t q = t; q < cols / 4; q += step) {
      const float4 v = x4[q];
      f(v.x), f(v.y), f(v.z), f(v.w);
    }
  } else {
    for (int64_t c = t; c < cols; c += step) f(x[c]);
  }
}

// out[c] = f(a[c], b[c]) over the same elements (b may be a), float4 when V4.
template <bool V4, class F>
__device__ inline void row_map(float* out, const float* a, const float* b, int64_t cols, int64_t t,
                               int64_t step, F&& f) {
  if constexpr (V4) {
    const float4 *a4 = reinterpret_cast<const float4*>(a), *b4 = reinterpret_cast<const float4*>(b);
    float4* o4 = reinterpret_cast<float4*>(out);
    for (int64_t q = t; q < cols / 4; q += step) {
      const float4 u = a4[q], v = b4[q];
      o4[q] = float4{f(u.x, v.x), f(u.y, v.y), f(u.z, v.z), f(u.w, v.w)};
    }
  } else {
    for (int64_t c = t; c < cols; c += step) out[c] = f(a[c], b[c]);
  }
}

// A row's softmax (or log-softmax) written from its (max, sum).
template <bool V4>
__device__ inline void softmax_write(float* y, const float* x, int64_t cols, int64_t t,
                                     int64_t step, float m, float s, bool log_out) {
  if (log_out) {
    const float lse = m + logf(s);
    row_map<V4>(y, x, x, cols, t, step, [lse](float v, float) { return v - lse; });
  } else {
    const float inv = 1.f / s;
    row_map<V4>(y, x, x, cols, t, step, [m, inv](float v, float) { return expf(v - m) * inv; });
  }
}

template <bool V4>
__global__ void softmax_k(float* out, const float* in, int64_t rows, int64_t cols, bool log_out) {
  const int lane = threadIdx.x & 31;
  SY_FOR_ROWS(r, rows) {
    const float* x = in + r * cols;
    float m = -INFINITY, s = 0.f;
    row_read<V4>(x, cols, lane, 32, [&](float v) { online_add(v, m, s); });
    warp_online_merge(m, s);
    softmax_write<V4>(out + r * cols, x, cols, lane, 32, m, s, log_out);
  }
}

// Long rows too few for a warp each to fill the GPU: a block per row, the
// (max, sum) merged across its 8 warps in shared memory.
template <bool V4>
__global__ void softmax_block_k(float* out, const float* in, int64_t rows, int64_t cols,
                                bool log_out) {
  __shared__ float wm[kRowsPerBlock], ws[kRowsPerBlock];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = in + r * cols;
    float m = -INFINITY, s = 0.f;
    row_read<V4>(x, cols, threadIdx.x, blockDim.x, [&](float v) { online_add(v, m, s); });
    warp_online_merge(m, s);
    if (lane == 0) wm[warp] = m, ws[warp] = s;
    __syncthreads();
    m = wm[0], s = ws[0];
    for (int w = 1; w < kRowsPerBlock; ++w) online_merge(m, s, wm[w], ws[w]);  // in order
    softmax_write<V4>(out + r * cols, x, cols, threadIdx.x, blockDim.x, m, s, log_out);
    __syncthreads();  // wm, ws reused by the next row
  }
}

// The backward's row sum: sum(dy) for log-softmax, sum(dy * y) for softmax.
template <bool V4>
__device__ inline float backward_partial(const float* g, const float* yr, int64_t cols, int64_t t,
                                         int64_t step, bool log_out) {
  float s = 0.f;
  if (log_out) {
    row_read<V4>(g, cols, t, step, [&](float v) { s += v; });
  } else if constexpr (V4) {
    const float4 *g4 = reinterpret_cast<const float4*>(g),
                 *y4 = reinterpret_cast<const float4*>(yr);
    for (int64_t q = t; q < cols / 4; q += step) {
      const float4 a = g4[q], b = y4[q];
      s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
  } else {
    for (int64_t c = t; c < cols; c += step) s += g[c] * yr[c];
  }
  return s;
}

template <bool V4>
__device__ inline void backward_write(float* d, const float* g, const float* yr, int64_t cols,
                                      int64_t t, int64_t step, float s, bool log_out) {
  if (log_out)
    row_map<V4>(d, g, yr, cols, t, step, [s](float gv, float yv) { return gv - expf(yv) * s; });
  else
    row_map<V4>(d, g, yr, cols, t, step, [s](float gv, float yv) { return yv * (gv - s); });
}

template <bool V4>
__global__ void softmax_backward_k(float* dx, const float* dy, const float* y, int64_t rows,
                                   int64_t cols, bool log_out) {
  const int lane = threadIdx.x & 31;
  SY_FOR_ROWS(r, rows) {
    const float *g = dy + r * cols, *yr = y + r * cols;
    const float s = warp_sum(backward_partial<V4>(g, yr, cols, lane, 32, log_out));
    backward_write<V4>(dx + r * cols, g, yr, cols, lane, 32, s, log_out);
  }
}

// The backward's long rows too few to fill the GPU: a block per row, the
// sum's warps added in order in shared memory.
template <bool V4>
__global__ void softmax_backward_block_k(float* dx, const float* dy, const float* y, int64_t rows,
                                         int64_t cols, bool log_out) {
  __shared__ float ws[kRowsPerBlock];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *g = dy + r * cols, *yr = y + r * cols;
    float s = warp_sum(backward_partial<V4>(g, yr, cols, threadIdx.x, blockDim.x, log_out));
    if (lane == 0) ws[warp] = s;
    __syncthreads();
    s = ws[0];
    for (int w = 1; w < kRowsPerBlock; ++w) s += ws[w];  // in order
    backward_write<V4>(dx + r * cols, g, yr, cols, threadIdx.x, blockDim.x, s, log_out);
    __syncthreads();  // ws reused by the next row
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

// Rows over 1,024 long and too few for the warps' blocks (8 rows each) to
// fill the GPU: a block per row.
bool block_per_row(int64_t rows, int64_t cols, const LaunchEnv& env) {
  return cols > 1024 && rows < 2 * int64_t(env.max_blocks);
}

// Every row of every argument starts on 16 bytes: float4 loads and stores.
bool rows_vec4(int64_t cols, std::initializer_list<const void*> ptrs) {
  if (cols % 4) return false;
  for (const void* q : ptrs)
    if (reinterpret_cast<uintptr_t>(q) % 16) return false;
  return true;
}

}  // namespace

void launch(const SoftmaxParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const float* in = static_cast<const float*>(args[1]);
  const int64_t rows = p.rows, cols = p.cols;
  if (rows <= 0 || cols <= 0) return;
  // A warp per row; a block per row when rows are long (over 1,024) and
  // too few for the warps' blocks (8 rows each) to fill the GPU. float4s
  // where every row starts 16-byte aligned.
  const bool v4 = rows_vec4(cols, {out, in});
  if (block_per_row(rows, cols, env)) {
    const unsigned blocks = unsigned(rows < env.max_blocks ? rows : env.max_blocks);
    if (v4) SY_LAUNCH(softmax_block_k<true>, blocks, kRowThreads, env.stream)
    (out, in, rows, cols, p.log);
    else SY_LAUNCH(softmax_block_k<false>, blocks, kRowThreads, env.stream)(out, in, rows, cols,
                                                                            p.log);
  } else if (v4) {
    SY_LAUNCH(softmax_k<true>, row_blocks(rows, env), kRowThreads, env.stream)
    (out, in, rows, cols, p.log);
  } else {
    SY_LAUNCH(softmax_k<false>, row_blocks(rows, env), kRowThreads, env.stream)
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
  // The forward's geometry: a warp per row, or a block per long row.
  const bool v4 = rows_vec4(cols, {dx, dy, y});
  if (block_per_row(rows, cols, env)) {
    const unsigned blocks = unsigned(rows < env.max_blocks ? rows : env.max_blocks);
    if (v4) SY_LAUNCH(softmax_backward_block_k<true>, blocks, kRowThreads, env.stream)
    (dx, dy, y, rows, cols, p.log);
    else SY_LAUNCH(softmax_backward_block_k<false>, blocks, kRowThreads, env.stream)(
        dx, dy, y, rows, cols, p.log);
  } else if (v4) {
    SY_LAUNCH(softmax_backward_k<true>, row_blocks(rows, env), kRowThreads, env.stream)
    (dx, dy, y, rows, cols, p.log);
  } else {
    SY_LAUNCH(softmax_backward_k<false>, row_blocks(rows, env), kRowThreads, env.stream)
    (dx, dy, y, rows, cols, p.log);
  }
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
