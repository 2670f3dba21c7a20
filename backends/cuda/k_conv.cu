// SPDX-License-Identifier: MIT
// Convolution, pooling and batch-norm kernels (the shapes are in backend/kernels.h):
//
// swap_axes: out[o, j, i, e] = in[o, i, j, e] over (outer, a, b, inner)
//   32-bit elements; one grid-stride pass over the output.
// im2col: the im2col lowering's GEMM operand, cols[(c, kh, kw), (n, oh, ow)];
//   one grid-stride pass over cols (consecutive threads, consecutive ow).
// col2im: its adjoint; one thread per dx element gathers its taps in a fixed
//   order, so the input gradient is the same every run (no atomics).
// conv2d, conv2d_backward_input, conv2d_backward_weight: implicit GEMMs per
//   group (and split), read in place (conv_gemm_k below): 64x64 tiles of
//   the product, K in steps of 16 through shared memory, 256 threads of 4x4
//   accumulators; each output element is one thread's sum in a fixed order.
// max_pool2d / avg_pool2d: one thread per output element (max_pool2d's
//   indices follow its maxima in the one output buffer).
// *_pool2d_backward: one thread per dx element, gathering the windows that
//   cover it (deterministic, no atomics).
// channel_stats / channel_sums: one block per channel, double partial sums
//   reduced per warp, then across the block's warps in shared memory.
// channel_affine: one grid-stride pass over the output.
// batch_norm_coef, batch_norm_coef_backward, batch_norm_running: a thread
//   per channel.
// All use kBlock-thread blocks, capped at env.max_blocks blocks.
#include "cuda_math.cuh"

namespace switchyard::cuda_impl {
namespace {

// Geometry, copied by value into the kernels.
struct Geom {
  int64_t n, c, h, w, oh, ow;
  int64_t k0, k1, s0, s1, p0, p1, d0, d1;
};

__global__ void swap_axes_k(uint32_t* out, const uint32_t* in, int64_t A, int64_t B, int64_t E,
                            int64_t total) {
  SY_GRID_STRIDE(k, total) {
    int64_t e = k % E, i = k / E % A, j = k / (E * A) % B, o = k / (E * A * B);
    out[k] = in[((o * A + i) * B + j) * E + e];
  }
}

__global__ void im2col_k(float* cols, const float* x, Geom g, int64_t total) {
  const int64_t ncols = g.n * g.oh * g.ow;
  SY_GRID_STRIDE(k, total) {
    int64_t col = k % ncols, row = k / ncols;
    int64_t ow = col % g.ow, oh = col / g.ow % g.oh, n = col / (g.ow * g.oh);
    int64_t kw = row % g.k1, kh = row / g.k1 % g.k0, c = row / (g.k1 * g.k0);
    int64_t ih = oh * g.s0 - g.p0 + kh * g.d0, iw = ow * g.s1 - g.p1 + kw * g.d1;
    cols[k] =
        ih >= 0 && ih < g.h && iw >= 0 && iw < g.w ? x[((n * g.c + c) * g.h + ih) * g.w + iw] : 0.f;
  }
}

__global__ void col2im_k(float* dx, const float* cols, Geom g, int64_t total) {
  const int64_t ncols = g.n * g.oh * g.ow;
  SY_GRID_STRIDE(k, total) {
    int64_t w = k % g.w, h = k / g.w % g.h, c = k / (g.w * g.h) % g.c, n = k / (g.w * g.h * g.c);
    float s = 0.f;
    for (int64_t kh = 0; kh < g.k0; ++kh) {
      int64_t th = h + g.p0 - kh * g.d0;
      if (th < 0 || th % g.s0 != 0 || th / g.s0 >= g.oh) continue;
      for (int64_t kw = 0; kw < g.k1; ++kw) {
        int64_t tw = w + g.p1 - kw * g.d1;
        if (tw < 0 || tw % g.s1 != 0 || tw / g.s1 >= g.ow) continue;
        int64_t row = (c * g.k0 + kh) * g.k1 + kw;
        s += cols[row * ncols + n * g.oh * g.ow + (th / g.s0) * g.ow + tw / g.s1];
      }
    }
    dx[k] = s;
  }
}

// ---- convolution as implicit GEMM ----------------------------------------------

// Its geometry, decoded once on the host (see backend/kernels.h).
struct ConvG {
  int64_t n, c, h, w, oc, g, cg, ocg, k0, k1, kk, s0, s1, p0, p1, d0, d1, oh, ow, p, hw;
  int64_t splits;
};
template <class Pm>
ConvG conv_g(const Pm& q) {
  ConvG g{};
  g.n = q.batch, g.c = q.channels, g.h = q.height, g.w = q.width, g.oc = q.out_channels;
  g.g = q.groups, g.cg = g.c / g.g, g.ocg = g.oc / g.g, g.k0 = q.kernel[0], g.k1 = q.kernel[1];
  g.kk = g.k0 * g.k1, g.s0 = q.stride[0], g.s1 = q.stride[1], g.p0 = q.padding[0];
  g.p1 = q.padding[1], g.d0 = q.dilation[0], g.d1 = q.dilation[1];
  g.oh = conv_out_size(g.h, g.k0, g.s0, g.p0, g.d0);
  g.ow = conv_out_size(g.w, g.k1, g.s1, g.p1, g.d1);
  g.p = g.oh * g.ow, g.hw = g.h * g.w, g.splits = 1;
  return g;
}

constexpr int kConvTile = 64, kConvK = 16;  // 256 threads: 16 x 16 of 4 x 4

// The product's sizes for mode 0 (forward), 1 (input), 2 (weight; K per split).
__host__ __device__ inline void conv_mnk(int mode, const ConvG& g, int64_t& M, int64_t& N,
                                         int64_t& K) {
  if (mode == 0) {
    M = g.ocg, N = g.n * g.p, K = g.cg * g.kk;
  } else if (mode == 1) {
    M = g.cg, N = g.n * g.hw, K = g.ocg * g.kk;
  } else {
    M = g.ocg, N = g.cg * g.kk, K = (g.n * g.p + g.splits - 1) / g.splits;
  }
}

// A (m, k) and B (k, n) of group grp, split sp, as conv_gemm.glsl documents.
template <int Mode>
__device__ inline float conv_a(const ConvG& g, const float* w, const float* dy, int64_t grp,
                               int64_t kbeg, int64_t m, int64_t k) {
  if (Mode == 0) return w[(grp * g.ocg + m) * g.cg * g.kk + k];
  if (Mode == 1) {
    int64_t oc = k / g.kk, t = k - oc * g.kk;
    return w[((grp * g.ocg + oc) * g.cg + m) * g.kk + t];
  }
  int64_t kg = kbeg + k, s = kg / g.p, pix = kg - s * g.p;
  return dy[(s * g.oc + grp * g.ocg + m) * g.p + pix];
}
template <int Mode>
__device__ inline float conv_b(const ConvG& g, const float* x, const float* dy, int64_t grp,
                               int64_t kbeg, int64_t k, int64_t n) {
  if (Mode == 0) {
    int64_t c = k / g.kk, t = k - c * g.kk, kh = t / g.k1, kw = t - kh * g.k1;
    int64_t s = n / g.p, pix = n - s * g.p, oh = pix / g.ow, ow = pix - oh * g.ow;
    int64_t ih = oh * g.s0 - g.p0 + kh * g.d0, iw = ow * g.s1 - g.p1 + kw * g.d1;
    if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return 0.f;
    return x[((s * g.c + grp * g.cg + c) * g.h + ih) * g.w + iw];
  }
  if (Mode == 1) {
    int64_t oc = k / g.kk, t = k - oc * g.kk, kh = t / g.k1, kw = t - kh * g.k1;
    int64_t s = n / g.hw, pix = n - s * g.hw, h = pix / g.w, wc = pix - h * g.w;
    int64_t th = h + g.p0 - kh * g.d0, tw = wc + g.p1 - kw * g.d1;
    if (th < 0 || tw < 0 || th % g.s0 != 0 || tw % g.s1 != 0) return 0.f;
    int64_t oh = th / g.s0, ow = tw / g.s1;
    if (oh >= g.oh || ow >= g.ow) return 0.f;
    return dy[((s * g.oc + grp * g.ocg + oc) * g.oh + oh) * g.ow + ow];
  }
  int64_t kg = kbeg + k, s = kg / g.p, pix = kg - s * g.p, oh = pix / g.ow, ow = pix - oh * g.ow;
  int64_t c = n / g.kk, t = n - c * g.kk, kh = t / g.k1, kw = t - kh * g.k1;
  int64_t ih = oh * g.s0 - g.p0 + kh * g.d0, iw = ow * g.s1 - g.p1 + kw * g.d1;
  if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return 0.f;
  return x[((s * g.c + grp * g.cg + c) * g.h + ih) * g.w + iw];
}

// out: y (mode 0), dx (1) or the weight partials (2). in0/in1: x, w (0);
// dy, w (1); dy, x (2). Grid (N tiles, M tiles, groups [x splits]).
template <int Mode>
__global__ void conv_gemm_k(float* out, const float* in0, const float* in1, const float* bias,
                            ConvG g, Unary act) {
  __shared__ float As[kConvK][kConvTile + 4];  // [k][m]
  __shared__ float Bs[kConvK][kConvTile + 4];  // [k][n]
  const float* x = Mode == 0 ? in0 : (Mode == 2 ? in1 : nullptr);
  const float* w = Mode == 2 ? nullptr : in1;
  const float* dy = Mode == 0 ? nullptr : in0;
  int64_t M, N, K;
  conv_mnk(Mode, g, M, N, K);
  const int64_t grp = int64_t(blockIdx.z) % g.g, sp = int64_t(blockIdx.z) / g.g;
  int64_t kbeg = 0;
  if (Mode == 2) {
    const int64_t total = g.n * g.p, len = K;
    kbeg = sp * len < total ? sp * len : total;
    K = (kbeg + len < total ? kbeg + len : total) - kbeg;
  }
  const int64_t m0 = int64_t(blockIdx.y) * kConvTile, n0 = int64_t(blockIdx.x) * kConvTile;
  const int t = int(threadIdx.x), tx = t % 16, ty = t / 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kConvK) {
    for (int i = t; i < kConvTile * kConvK; i += 256) {
      const int kk = i / kConvTile, mm = i % kConvTile;
      const int64_t k = k0 + kk;
      As[kk][mm] = k < K && m0 + mm < M ? conv_a<Mode>(g, w, dy, grp, kbeg, m0 + mm, k) : 0.f;
      Bs[kk][mm] = k < K && n0 + mm < N ? conv_b<Mode>(g, x, dy, grp, kbeg, k, n0 + mm) : 0.f;
    }
    __syncthreads();
    for (int kk = 0; kk < kConvK; ++kk) {
      float a[4], b[4];
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i], b[i] = Bs[kk][tx * 4 + i];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + ty * 4 + i;
    if (m >= M) continue;
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx * 4 + j;
      if (n >= N) continue;
      float v = acc[i][j];
      if (Mode == 0) {
        const int64_t s = n / g.p, pix = n - s * g.p;
        if (bias) v += bias[grp * g.ocg + m];
        out[(s * g.oc + grp * g.ocg + m) * g.p + pix] = unary_apply(act, v);
      } else if (Mode == 1) {
        const int64_t s = n / g.hw, pix = n - s * g.hw;
        out[(s * g.c + grp * g.cg + m) * g.hw + pix] = v;
      } else {
        out[(sp * g.oc + grp * g.ocg + m) * N + n] = v;
      }
    }
  }
}

// The grid of one convolution GEMM; z = groups (x splits).
dim3 conv_grid(const char* op, int mode, const ConvG& g) {
  int64_t M, N, K;
  conv_mnk(mode, g, M, N, K);
  const int64_t gx = (N + kConvTile - 1) / kConvTile, gy = (M + kConvTile - 1) / kConvTile;
  const int64_t gz = g.g * (mode == 2 ? g.splits : 1);
  SY_CHECK(gx <= INT32_MAX && gy <= 65535 && gz <= 65535, op,
           "expected a grid within CUDA's limits (x < 2^31, y and z <= 65535), found ", gx, " x ",
           gy, " x ", gz, ": split the batch or the groups");
  return dim3(unsigned(gx), unsigned(gy), unsigned(gz));
}

// Batch norm's per-channel coefficients (kernels.h), a thread per channel.
__global__ void batch_norm_coef_k(float* out, const float* mean, const float* var, const float* w,
                                  const float* b, int64_t C, bool has_w, bool has_b, float eps) {
  SY_GRID_STRIDE(c, C) {
    const float inv = 1.f / sqrtf(var[c] + eps);
    out[c] = mean[c];
    out[C + c] = has_w ? inv * w[c] : inv;
    out[2 * C + c] = has_b ? b[c] : 0.f;
    out[3 * C + c] = inv;
  }
}

__global__ void batch_norm_coef_backward_k(float* out, const float* coef, const float* sums,
                                           int64_t C, float per, bool training) {
  SY_GRID_STRIDE(c, C) {
    const float mean = coef[c], scale = coef[C + c], inv = coef[3 * C + c];
    const float dweight = inv * sums[C + c];
    out[c] = 0.f;
    out[C + c] = scale;
    out[2 * C + c] = training ? -(scale * sums[c] * per) : 0.f;
    out[3 * C + c] = mean;
    out[4 * C + c] = training ? -(scale * inv * dweight * per) : 0.f;
    out[5 * C + c] = dweight;
  }
}

__global__ void batch_norm_running_k(float* rm, float* rv, long long* count, const float* stats,
                                     int64_t C, float momentum, float unbias) {
  if (count && blockIdx.x == 0 && threadIdx.x == 0) ++*count;
  SY_GRID_STRIDE(c, C) {
    pointwise::sgd_step(rm[c], stats[c], -momentum, -1.f);
    pointwise::sgd_step(rv[c], stats[C + c] * unbias, -momentum, -1.f);
  }
}

// The windows covering plane index x: [lo, hi).
__device__ inline void covering(int64_t x, int64_t k, int64_t s, int64_t pad, int64_t out,
                                int64_t& lo, int64_t& hi) {
  int64_t t = x + pad;
  lo = t - k < 0 ? 0 : (t - k) / s + 1;
  hi = t / s + 1 < out ? t / s + 1 : out;
}

__device__ inline float pool_divisor(const Geom& g, bool include_pad, int64_t oh, int64_t ow) {
  int64_t hs = oh * g.s0 - g.p0, ws = ow * g.s1 - g.p1;
  if (include_pad) {
    int64_t he = hs + g.k0 < g.h + g.p0 ? hs + g.k0 : g.h + g.p0;
    int64_t we = ws + g.k1 < g.w + g.p1 ? ws + g.k1 : g.w + g.p1;
    return float((he - hs) * (we - ws));
  }
  int64_t h0 = hs > 0 ? hs : 0, w0 = ws > 0 ? ws : 0;
  int64_t h1 = hs + g.k0 < g.h ? hs + g.k0 : g.h, w1 = ws + g.k1 < g.w ? ws + g.k1 : g.w;
  return float((h1 - h0) * (w1 - w0));
}

// Geom's n is the plane count for pooling; c the channels (for coef). With
// coef, each value is first (v - k0[c]) * k1[c] + k2[c] (then max(v, 0)
// with relu): batch norm and its ReLU fused into the pooling.
__global__ void max_pool2d_k(float* y, int32_t* idx, const float* x, const float* coef, bool relu,
                             Geom g, int64_t total) {
  SY_GRID_STRIDE(k, total) {
    int64_t ow = k % g.ow, oh = k / g.ow % g.oh, pl = k / (g.ow * g.oh);
    int64_t hs = oh * g.s0 - g.p0, ws = ow * g.s1 - g.p1;
    int64_t h0 = hs > 0 ? hs : 0, w0 = ws > 0 ? ws : 0;
    int64_t h1 = hs + g.k0 < g.h ? hs + g.k0 : g.h, w1 = ws + g.k1 < g.w ? ws + g.k1 : g.w;
    const float* src = x + pl * g.h * g.w;
    float k0 = 0.f, k1 = 1.f, k2 = 0.f;
    if (coef) {
      const int64_t c = pl % g.c;
      k0 = coef[c], k1 = coef[g.c + c], k2 = coef[2 * g.c + c];
    }
    float best = -INFINITY;
    int64_t at = h0 * g.w + w0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        float v = src[h * g.w + w];
        if (coef) {
          v = (v - k0) * k1 + k2;
          if (relu) v = pointwise::unary(Unary::relu, v);
        }
        if (v > best || v != v) {  // once best is NaN only a later NaN replaces it
          best = v;
          at = h * g.w + w;
        }
      }
    y[k] = best;
    idx[k] = int32_t(at);
  }
}

__global__ void max_pool2d_backward_k(float* dx, const float* dy, const int32_t* idx, Geom g,
                                      int64_t total) {
  SY_GRID_STRIDE(k, total) {
    int64_t w = k % g.w, h = k / g.w % g.h, pl = k / (g.w * g.h);
    int64_t oh0, oh1, ow0, ow1;
    covering(h, g.k0, g.s0, g.p0, g.oh, oh0, oh1);
    covering(w, g.k1, g.s1, g.p1, g.ow, ow0, ow1);
    float s = 0.f;
    const int32_t me = int32_t(h * g.w + w);
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        int64_t o = (pl * g.oh + oh) * g.ow + ow;
        if (idx[o] == me) s += dy[o];
      }
    dx[k] = s;
  }
}

__global__ void avg_pool2d_k(float* y, const float* x, Geom g, bool include_pad, int64_t total) {
  SY_GRID_STRIDE(k, total) {
    int64_t ow = k % g.ow, oh = k / g.ow % g.oh, pl = k / (g.ow * g.oh);
    int64_t hs = oh * g.s0 - g.p0, ws = ow * g.s1 - g.p1;
    int64_t h0 = hs > 0 ? hs : 0, w0 = ws > 0 ? ws : 0;
    int64_t h1 = hs + g.k0 < g.h ? hs + g.k0 : g.h, w1 = ws + g.k1 < g.w ? ws + g.k1 : g.w;
    const float* src = x + pl * g.h * g.w;
    float s = 0.f;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) s += src[h * g.w + w];
    y[k] = s / pool_divisor(g, include_pad, oh, ow);
  }
}

__global__ void avg_pool2d_backward_k(float* dx, const float* dy, Geom g, bool include_pad,
                                      int64_t total) {
  SY_GRID_STRIDE(k, total) {
    int64_t w = k % g.w, h = k / g.w % g.h, pl = k / (g.w * g.h);
    int64_t oh0, oh1, ow0, ow1;
    covering(h, g.k0, g.s0, g.p0, g.oh, oh0, oh1);
    covering(w, g.k1, g.s1, g.p1, g.ow, ow0, ow1);
    float s = 0.f;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow)
        s += dy[(pl * g.oh + oh) * g.ow + ow] / pool_divisor(g, include_pad, oh, ow);
    dx[k] = s;
  }
}

// One block per channel (grid-stride over channels); double partial sums.
__device__ inline double block_sum(double s, double* part) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  s = warp_sum(s);
  if (lane == 0) part[warp] = s;
  __syncthreads();
  double r = 0;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) r += part[w];
  __syncthreads();
  return r;
}

__global__ void channel_stats_k(float* out, const float* x, int64_t outer, int64_t C, int64_t E) {
  __shared__ double part[kBlock / 32];
  const int64_t count = outer * E;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double s = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) s += x[(k / E * C + c) * E + k % E];
    const double mean = count ? block_sum(s, part) / double(count) : 0.0;
    const float m = float(mean);
    double v = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      float d = x[(k / E * C + c) * E + k % E] - m;
      v += double(d) * d;
    }
    const double var = count ? block_sum(v, part) / double(count) : 0.0;
    if (threadIdx.x == 0) {
      out[c] = m;
      out[C + c] = float(var);
    }
  }
}

// The pooled form of channel_sums and channel_affine (kernels.h): P x P
// windows with stride P over planes of width W, OH x OW windows a plane;
// r: the pooling's maxima then indices (n windows in all). P = 0: none.
struct Pooled {
  int64_t P = 0, W = 0, OH = 0, OW = 0;
  template <class Params>
  static Pooled of(const Params& p) {
    Pooled q;
    if (p.pool > 0) q = {p.pool, p.width, p.inner / p.width / p.pool, p.width / p.pool};
    return q;
  }
};

__global__ void channel_sums_k(float* out, const float* a, const float* b, const float* mean,
                               const float* mask, bool relu_mask, Pooled pl, int64_t outer,
                               int64_t C, int64_t E) {
  __shared__ double part[kBlock / 32];
  const int64_t count = outer * E;
  const int64_t PE = pl.OH * pl.OW, n = outer * C * PE;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double s = 0, t = 0;
    const float m = mean[c];
    // The pooled form: over the windows, each adding its gradient at its index.
    for (int64_t k = threadIdx.x; pl.P && k < outer * PE; k += blockDim.x) {
      const int64_t r = k / PE * C + c, j = r * PE + k % PE;
      const float v = relu_mask && !(mask[j] > 0.f) ? 0.f : a[j];
      const int32_t at = reinterpret_cast<const int32_t*>(mask)[n + j];
      s += v;
      t += double(v) * (b[r * E + at] - m);
    }
    for (int64_t k = threadIdx.x; !pl.P && k < count; k += blockDim.x) {
      const int64_t i = (k / E * C + c) * E + k % E;
      const float v = mask && !(mask[i] > 0.f) ? 0.f : a[i];
      s += v;
      t += double(v) * (b[i] - m);
    }
    s = block_sum(s, part);
    t = block_sum(t, part);
    if (threadIdx.x == 0) {
      out[c] = float(s);
      out[C + c] = float(t);
    }
  }
}

__global__ void channel_affine_k(float* y, const float* a, const float* b, const float* coef,
                                 const float* mask, bool relu_mask, Pooled pl, int64_t C, int64_t E,
                                 bool has_b, bool relu, int64_t total) {
  const int64_t n = total / E * pl.OH * pl.OW;  // windows (the pooled form)
  SY_GRID_STRIDE(k, total) {
    const int64_t c = k / E % C;
    float u;
    if (pl.P) {  // the gradient of the window whose index is this element, else 0
      const int64_t r = k / E, e = k % E, oh = e / pl.W / pl.P, ow = e % pl.W / pl.P;
      const int64_t j = (r * pl.OH + oh) * pl.OW + ow;
      u = oh < pl.OH && ow < pl.OW && reinterpret_cast<const int32_t*>(mask)[n + j] == e &&
                  (!relu_mask || mask[j] > 0.f)
              ? a[j]
              : 0.f;
    } else {
      u = relu_mask && !(mask[k] > 0.f) ? 0.f : a[k];
    }
    float v = (u - coef[c]) * coef[C + c] + coef[2 * C + c];
    if (has_b) v += (b[k] - coef[3 * C + c]) * coef[4 * C + c];
    y[k] = relu ? pointwise::unary(Unary::relu, v) : v;
  }
}

template <class P>
Geom conv_geom(const P& p) {
  return {p.batch,      p.channels,   p.height,      p.width,      p.out_h,
          p.out_w,      p.kernel[0],  p.kernel[1],   p.stride[0],  p.stride[1],
          p.padding[0], p.padding[1], p.dilation[0], p.dilation[1]};
}
template <class P>
Geom pool_geom(const P& p) {
  return {p.planes,    1,           p.height,    p.width,      p.out_h,      p.out_w, p.kernel[0],
          p.kernel[1], p.stride[0], p.stride[1], p.padding[0], p.padding[1], 1,       1};
}

// out[j] = the sum of part[z * n + j] over z < splits, in order.
__global__ void split_sum_k(float* out, const float* part, int64_t n, int splits) {
  SY_GRID_STRIDE(j, n) {
    float t = 0.f;
    for (int z = 0; z < splits; ++z) t += part[int64_t(z) * n + j];
    out[j] = t;
  }
}

}  // namespace

void launch(const SwapAxesParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t total = p.outer * p.a * p.b * p.inner;
  if (total <= 0) return;
  SY_LAUNCH(swap_axes_k, blocks_for(total, env), kBlock, env.stream)
  (static_cast<uint32_t*>(args[0]), static_cast<const uint32_t*>(args[1]), p.a, p.b, p.inner,
   total);
  SY_CUDA_LAUNCHED("swap_axes");
}

void launch(const Im2colParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t total = p.channels * p.kernel[0] * p.kernel[1] * p.batch * p.out_h * p.out_w;
  if (total <= 0) return;
  SY_LAUNCH(im2col_k, blocks_for(total, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]), conv_geom(p), total);
  SY_CUDA_LAUNCHED("im2col");
}

void launch(const Col2imParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t total = p.batch * p.channels * p.height * p.width;
  if (total <= 0) return;
  SY_LAUNCH(col2im_k, blocks_for(total, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]), conv_geom(p), total);
  SY_CUDA_LAUNCHED("col2im");
}

void launch(const Conv2dParams& p, void* const* args, const LaunchEnv& env) {
  const ConvG g = conv_g(p);
  if (g.n * g.oc * g.p <= 0) return;
  SY_LAUNCH(conv_gemm_k<0>, conv_grid("conv2d", 0, g), 256, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]),
   static_cast<const float*>(args[2]), p.has_bias ? static_cast<const float*>(args[3]) : nullptr, g,
   p.act);
  SY_CUDA_LAUNCHED("conv2d");
}

void launch(const Conv2dBackwardInputParams& p, void* const* args, const LaunchEnv& env) {
  const ConvG g = conv_g(p);
  if (g.n * g.c * g.hw <= 0) return;
  SY_LAUNCH(conv_gemm_k<1>, conv_grid("conv2d_backward_input", 1, g), 256, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]),
   static_cast<const float*>(args[2]), nullptr, g, Unary::none);
  SY_CUDA_LAUNCHED("conv2d_backward_input");
}

void launch(const Conv2dBackwardWeightParams& p, void* const* args, const LaunchEnv& env) {
  ConvG g = conv_g(p);
  g.splits = p.splits > 1 ? p.splits : 1;
  const int64_t whole = g.oc * g.cg * g.kk;
  if (g.splits * whole <= 0) return;
  float* out = static_cast<float*>(args[0]);
  // One sum asked for (a device whose convolutions are cuDNN's, on a shape
  // cuDNN left to this kernel): the positions are still split, one part
  // per about 1,024 (at most 64, as the graph builder's), into the scratch
  // memory, then the parts added in order. One part would leave a GPU
  // with a few blocks walking every position.
  float* part = nullptr;
  if (g.splits == 1) {
    int64_t s = (g.n * g.p + 1023) / 1024;
    s = s < 64 ? s : 64;
    const int64_t fit = int64_t(env.scratch_bytes / sizeof(float)) / whole;
    s = s < fit ? s : fit;
    if (s >= 2) g.splits = s, part = static_cast<float*>(env.scratch);
  }
  SY_LAUNCH(conv_gemm_k<2>, conv_grid("conv2d_backward_weight", 2, g), 256, env.stream)
  (part ? part : out, static_cast<const float*>(args[1]), static_cast<const float*>(args[2]),
   nullptr, g, Unary::none);
  SY_CUDA_LAUNCHED("conv2d_backward_weight");
  if (part) {
    SY_LAUNCH(split_sum_k, blocks_for(whole, env), kBlock, env.stream)
    (out, part, whole, int(g.splits));
    SY_CUDA_LAUNCHED("conv2d_backward_weight");
  }
}

void launch(const MaxPool2dParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t total = p.planes * p.out_h * p.out_w;
  if (total <= 0) return;
  Geom g = pool_geom(p);
  g.c = p.affine ? p.channels : 1;
  SY_LAUNCH(max_pool2d_k, blocks_for(total, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<int32_t*>(args[0]) + total,
   static_cast<const float*>(args[1]), p.affine ? static_cast<const float*>(args[2]) : nullptr,
   p.relu, g, total);
  SY_CUDA_LAUNCHED("max_pool2d");
}

void launch(const MaxPool2dBackwardParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t total = p.planes * p.height * p.width;
  if (total <= 0) return;
  SY_LAUNCH(max_pool2d_backward_k, blocks_for(total, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]),
   static_cast<const int32_t*>(args[2]), pool_geom(p), total);
  SY_CUDA_LAUNCHED("max_pool2d_backward");
}

void launch(const AvgPool2dParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t total = p.planes * p.out_h * p.out_w;
  if (total <= 0) return;
  SY_LAUNCH(avg_pool2d_k, blocks_for(total, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]), pool_geom(p),
   p.count_include_pad, total);
  SY_CUDA_LAUNCHED("avg_pool2d");
}

void launch(const AvgPool2dBackwardParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t total = p.planes * p.height * p.width;
  if (total <= 0) return;
  SY_LAUNCH(avg_pool2d_backward_k, blocks_for(total, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]), pool_geom(p),
   p.count_include_pad, total);
  SY_CUDA_LAUNCHED("avg_pool2d_backward");
}

void launch(const ChannelStatsParams& p, void* const* args, const LaunchEnv& env) {
  if (p.channels <= 0) return;
  SY_LAUNCH(channel_stats_k, blocks_for(p.channels, env, 1), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]), p.outer, p.channels, p.inner);
  SY_CUDA_LAUNCHED("channel_stats");
}

void launch(const ChannelSumsParams& p, void* const* args, const LaunchEnv& env) {
  if (p.channels <= 0) return;
  SY_LAUNCH(channel_sums_k, blocks_for(p.channels, env, 1), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]),
   static_cast<const float*>(args[2]), static_cast<const float*>(args[3]),
   p.relu_mask || p.pool > 0 ? static_cast<const float*>(args[4]) : nullptr, p.relu_mask,
   Pooled::of(p), p.outer, p.channels, p.inner);
  SY_CUDA_LAUNCHED("channel_sums");
}

void launch(const BatchNormCoefParams& p, void* const* args, const LaunchEnv& env) {
  if (p.channels <= 0) return;
  SY_LAUNCH(batch_norm_coef_k, blocks_for(p.channels, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]),
   static_cast<const float*>(args[2]), static_cast<const float*>(args[3]),
   static_cast<const float*>(args[4]), p.channels, p.has_weight, p.has_bias, p.eps);
  SY_CUDA_LAUNCHED("batch_norm_coef");
}

void launch(const BatchNormCoefBackwardParams& p, void* const* args, const LaunchEnv& env) {
  if (p.channels <= 0) return;
  SY_LAUNCH(batch_norm_coef_backward_k, blocks_for(p.channels, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]),
   static_cast<const float*>(args[2]), p.channels, 1.f / float(p.count), p.training);
  SY_CUDA_LAUNCHED("batch_norm_coef_backward");
}

void launch(const BatchNormRunningParams& p, void* const* args, const LaunchEnv& env) {
  if (p.channels <= 0) return;
  SY_LAUNCH(batch_norm_running_k, blocks_for(p.channels, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<float*>(args[1]),
   p.has_count ? static_cast<long long*>(args[2]) : nullptr,
   static_cast<const float*>(args[p.has_count ? 3 : 2]), p.channels, p.momentum,
   float(p.count) / float(p.count - 1));
  SY_CUDA_LAUNCHED("batch_norm_running");
}

void launch(const ChannelAffineParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t total = p.outer * p.channels * p.inner;
  if (total <= 0) return;
  SY_LAUNCH(channel_affine_k, blocks_for(total, env), kBlock, env.stream)
  (static_cast<float*>(args[0]), static_cast<const float*>(args[1]),
   static_cast<const float*>(args[2]), static_cast<const float*>(args[3]),
   p.relu_mask || p.pool > 0 ? static_cast<const float*>(args[4]) : nullptr, p.relu_mask,
   Pooled::of(p), p.channels, p.inner, p.has_b, p.relu, total);
  SY_CUDA_LAUNCHED("channel_affine");
}

}  // namespace switchyard::cuda_impl
