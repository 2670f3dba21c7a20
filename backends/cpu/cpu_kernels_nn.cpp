// SPDX-License-Identifier: MIT
// The CPU's layer kernels (see cpu_kernels_nn.h), over the thread pool.
#include "cpu_kernels_nn.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu_kernels.h"
#include "pointwise.h"
#include "switchyard/error.h"
#include "thread_pool.h"

namespace switchyard::cpu_impl {
namespace {

constexpr int64_t kGrain = kElementGrain;  // elements per chunk worth a thread wake-up

template <class T>
T* as(void* p) {
  return static_cast<T*>(p);
}

template <class F>
void pfor(int64_t n, F&& f) {
  pool().parallel_for(n, kGrain, [&](int64_t lo, int64_t hi) { f(lo, hi); });
}

}  // namespace

void run(const SwapAxesParams& p, void* const* a) {
  auto* out = as<uint32_t>(a[0]);
  const auto* in = as<const uint32_t>(a[1]);
  const int64_t A = p.a, B = p.b, E = p.inner;
  // One output row (o, j) of A * E elements per task.
  pool().parallel_for(p.outer * B, std::max<int64_t>(1, kGrain / std::max<int64_t>(A * E, 1)),
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t r = lo; r < hi; ++r) {
                          const int64_t o = r / B, j = r % B;
                          uint32_t* dst = out + r * A * E;
                          const uint32_t* src = in + (o * A * B + j) * E;
                          if (E == 1)
                            for (int64_t i = 0; i < A; ++i) dst[i] = src[i * B];
                          else
                            for (int64_t i = 0; i < A; ++i)
                              std::memcpy(dst + i * E, src + i * B * E, size_t(E) * 4);
                        }
                      });
}

// For one output row (oh) or column (ow): the first and last output index
// whose tap k reads inside [0, size): in = o*s - pad + k*d.
struct TapRange {
  int64_t lo, hi;  // [lo, hi)
};
TapRange tap_range(int64_t size, int64_t out, int64_t s, int64_t pad, int64_t kd) {
  // in >= 0  <=>  o >= (pad - kd) / s (rounded up); in < size  <=>  o*s < size + pad - kd
  int64_t lo = pad - kd <= 0 ? 0 : (pad - kd + s - 1) / s;
  int64_t hi = size + pad - kd <= 0 ? 0 : (size + pad - kd + s - 1) / s;
  return {std::min(lo, out), std::clamp(hi, std::min(lo, out), out)};
}

// ---- convolution ---------------------------------------------------------------
// Each kernel works on chunks of samples of one group at a time: the
// chunk's im2col matrix (Cg*KH*KW x S*OH*OW, in a thread's scratch, a few
// hundred KB) and one single-threaded GEMM on it, the tasks spread over the
// pool. Nothing of the expansion reaches the device's memory, and each
// output element is written by one task in a fixed order (deterministic).

namespace {

struct ConvGeom {
  int64_t N, C, H, W, OC, G, Cg, OCg, K0, K1, s0, s1, p0, p1, d0, d1, OH, OW, P, CKg;
  template <class Pm>
  explicit ConvGeom(const Pm& p) : ConvGeom(p, p.out_channels, p.groups) {}
  // im2col's and col2im's params: all channels, no output channels.
  explicit ConvGeom(const Im2colParams& p) : ConvGeom(p, 0, 1) {}
  explicit ConvGeom(const Col2imParams& p) : ConvGeom(p, 0, 1) {}
  template <class Pm>
  ConvGeom(const Pm& p, int64_t out_channels, int64_t groups)
      : N(p.batch),
        C(p.channels),
        H(p.height),
        W(p.width),
        OC(out_channels),
        G(groups),
        Cg(C / G),
        OCg(OC / G),
        K0(p.kernel[0]),
        K1(p.kernel[1]),
        s0(p.stride[0]),
        s1(p.stride[1]),
        p0(p.padding[0]),
        p1(p.padding[1]),
        d0(p.dilation[0]),
        d1(p.dilation[1]),
        OH(conv_out_size(H, K0, s0, p0, d0)),
        OW(conv_out_size(W, K1, s1, p1, d1)),
        P(OH * OW),
        CKg(Cg * K0 * K1) {}
  // Samples per chunk: at least 512 GEMM columns (a GEMM narrower than that
  // runs well below the BLAS's speed), at most the batch.
  int64_t chunk() const {
    return std::clamp<int64_t>((512 + P - 1) / std::max<int64_t>(P, 1), 1, N);
  }
};

// A thread's scratch, grown on demand and kept (the pool's threads live on).
float* scratch(int which, size_t floats) {
  thread_local std::vector<float> buf[3];
  if (buf[which].size() < floats) buf[which].resize(floats);
  return buf[which].data();
}

// cols (CKg, S*P; rows ncols apart) = im2col of samples [n0, n0 + S) of
// group grp.
void im2col_chunk(const ConvGeom& g, const float* x, int64_t n0, int64_t S, int64_t grp,
                  float* cols, int64_t ncols) {
  for (int64_t row = 0; row < g.CKg; ++row) {
    const int64_t c = row / (g.K0 * g.K1), kh = row / g.K1 % g.K0, kw = row % g.K1;
    const TapRange rw = tap_range(g.W, g.OW, g.s1, g.p1, kw * g.d1);
    for (int64_t n = 0; n < S; ++n) {
      float* dst = cols + row * ncols + n * g.P;
      const float* plane = x + ((n0 + n) * g.C + grp * g.Cg + c) * g.H * g.W;
      for (int64_t oh = 0; oh < g.OH; ++oh, dst += g.OW) {
        const int64_t ih = oh * g.s0 - g.p0 + kh * g.d0;
        if (ih < 0 || ih >= g.H) {
          std::fill_n(dst, g.OW, 0.f);
          continue;
        }
        const int64_t base = ih * g.W - g.p1 + kw * g.d1;
        std::fill_n(dst, rw.lo, 0.f);
        if (g.s1 == 1 && rw.hi > rw.lo)
          std::memcpy(dst + rw.lo, plane + base + rw.lo, size_t(rw.hi - rw.lo) * 4);
        else
          for (int64_t ow = rw.lo; ow < rw.hi; ++ow) dst[ow] = plane[base + ow * g.s1];
        std::fill(dst + rw.hi, dst + g.OW, 0.f);
      }
    }
  }
}

// The adjoint: dx's planes of samples [n0, n0 + S), group grp = the sum of
// the cols (CKg, S*P; rows ncols apart) entries that read them, taps in a
// fixed order.
void col2im_chunk(const ConvGeom& g, const float* cols, int64_t n0, int64_t S, int64_t grp,
                  float* dx, int64_t ncols) {
  for (int64_t n = 0; n < S; ++n)
    for (int64_t c = 0; c < g.Cg; ++c) {
      float* plane = dx + ((n0 + n) * g.C + grp * g.Cg + c) * g.H * g.W;
      std::fill_n(plane, g.H * g.W, 0.f);
      for (int64_t kh = 0; kh < g.K0; ++kh)
        for (int64_t kw = 0; kw < g.K1; ++kw) {
          const float* src = cols + ((c * g.K0 + kh) * g.K1 + kw) * ncols + n * g.P;
          const TapRange rh = tap_range(g.H, g.OH, g.s0, g.p0, kh * g.d0);
          const TapRange rw = tap_range(g.W, g.OW, g.s1, g.p1, kw * g.d1);
          for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
            const int64_t base = (oh * g.s0 - g.p0 + kh * g.d0) * g.W - g.p1 + kw * g.d1;
            const float* s = src + oh * g.OW;
            for (int64_t ow = rw.lo; ow < rw.hi; ++ow) plane[base + ow * g.s1] += s[ow];
          }
        }
    }
}

// dy's rows of group grp for samples [n0, n0 + S), as one (OCg, S*P) matrix.
void gather_dy(const ConvGeom& g, const float* dy, int64_t n0, int64_t S, int64_t grp, float* out) {
  for (int64_t m = 0; m < g.OCg; ++m)
    for (int64_t n = 0; n < S; ++n)
      std::memcpy(out + (m * S + n) * g.P, dy + ((n0 + n) * g.OC + grp * g.OCg + m) * g.P,
                  size_t(g.P) * 4);
}

void check_blas_sizes(const char* op, const ConvGeom& g) {
  SY_CHECK(g.CKg <= INT32_MAX && g.N * g.P <= INT32_MAX && g.OCg <= INT32_MAX, op,
           "expected GEMM dimensions below 2^31 on the CPU (BLAS takes int), found ", g.OCg, " x ",
           g.N * g.P, " x ", g.CKg);
}

// fn(group, first sample, samples) for each chunk of the batch and group,
// the tasks spread over the pool.
template <class F>
void for_chunks(const ConvGeom& g, F&& fn) {
  const int64_t S = g.chunk(), chunks = (g.N + S - 1) / S;
  pool().parallel_for(chunks * g.G, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n0 = t / g.G * S;
      fn(t % g.G, n0, std::min(S, g.N - n0));
    }
  });
}

}  // namespace

// The im2col lowering's passes: the whole batch's matrix (C*KH*KW, N*P), a
// sample per task (col2im: each sample's planes written by one task).
void run(const Im2colParams& p, void* const* a) {
  const ConvGeom g(p);
  pool().parallel_for(g.N, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n)
      im2col_chunk(g, as<const float>(a[1]), n, 1, 0, as<float>(a[0]) + n * g.P, g.N * g.P);
  });
}

void run(const Col2imParams& p, void* const* a) {
  const ConvGeom g(p);
  pool().parallel_for(g.N, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n)
      col2im_chunk(g, as<const float>(a[1]) + n * g.P, n, 1, 0, as<float>(a[0]), g.N * g.P);
  });
}

void run(const Conv2dParams& p, void* const* a) {
  const ConvGeom g(p);
  check_blas_sizes("conv2d", g);
  float* y = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  const float* w = as<const float>(a[2]);
  const float* bias = p.has_bias ? as<const float>(a[3]) : nullptr;
  for_chunks(g, [&](int64_t grp, int64_t n0, int64_t s) {
    float* cols = scratch(0, size_t(g.CKg * s * g.P));
    float* out = scratch(1, size_t(g.OCg * s * g.P));
    im2col_chunk(g, x, n0, s, grp, cols, s * g.P);
    gemm(false, false, g.OCg, s * g.P, g.CKg, 0, 0, 1.f, w + grp * g.OCg * g.CKg, cols, nullptr,
         out);
    for (int64_t m = 0; m < g.OCg; ++m) {
      const float b = bias ? bias[grp * g.OCg + m] : 0.f;
      for (int64_t n = 0; n < s; ++n) {
        const float* src = out + (m * s + n) * g.P;
        float* dst = y + ((n0 + n) * g.OC + grp * g.OCg + m) * g.P;
        if (p.act == Unary::none)
          for (int64_t i = 0; i < g.P; ++i) dst[i] = src[i] + b;
        else
          for (int64_t i = 0; i < g.P; ++i) dst[i] = pointwise::unary(p.act, src[i] + b);
      }
    }
  });
}

void run(const Conv2dBackwardInputParams& p, void* const* a) {
  const ConvGeom g(p);
  check_blas_sizes("conv2d_backward_input", g);
  float* dx = as<float>(a[0]);
  const float* dy = as<const float>(a[1]);
  const float* w = as<const float>(a[2]);
  for_chunks(g, [&](int64_t grp, int64_t n0, int64_t s) {
    float* dyc = scratch(0, size_t(g.OCg * s * g.P));
    float* dcols = scratch(1, size_t(g.CKg * s * g.P));
    gather_dy(g, dy, n0, s, grp, dyc);
    // dcols (CKg, s*P) = W_g^T dy_g: W_g is stored (OCg, CKg).
    gemm(true, false, g.CKg, s * g.P, g.OCg, 0, 0, 1.f, w + grp * g.OCg * g.CKg, dyc, nullptr,
         dcols);
    col2im_chunk(g, dcols, n0, s, grp, dx, s * g.P);
  });
}

void run(const Conv2dBackwardWeightParams& p, void* const* a) {
  const ConvGeom g(p);
  check_blas_sizes("conv2d_backward_weight", g);
  float* out = as<float>(a[0]);
  const float* dy = as<const float>(a[1]);
  const float* x = as<const float>(a[2]);
  const int64_t total = g.N * g.P, splits = std::max<int64_t>(p.splits, 1);
  const int64_t len = (total + splits - 1) / splits, S = g.chunk();
  // One task per (split, group): its positions [begin, end) in chunks of
  // samples, in order; the first chunk writes, the others add.
  pool().parallel_for(splits * g.G, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t grp = t % g.G, sp = t / g.G;
      const int64_t begin = std::min(total, sp * len), end = std::min(total, begin + len);
      float* dst = out + (sp * g.OC + grp * g.OCg) * g.CKg;
      if (begin == end) {
        std::fill_n(dst, g.OCg * g.CKg, 0.f);
        continue;
      }
      bool first = true;
      for (int64_t n0 = begin / g.P; n0 * g.P < end; n0 += S) {
        const int64_t s = std::min(S, g.N - n0);
        const int64_t c0 = std::max(begin, n0 * g.P) - n0 * g.P;
        const int64_t c1 = std::min(end, (n0 + s) * g.P) - n0 * g.P;
        float* cols = scratch(0, size_t(g.CKg * s * g.P));
        float* dyc = scratch(1, size_t(g.OCg * s * g.P));
        im2col_chunk(g, x, n0, s, grp, cols, s * g.P);
        gather_dy(g, dy, n0, s, grp, dyc);
        // (OCg, CKg) = dyc[:, c0:c1] cols[:, c0:c1]^T
        float* part = first ? dst : scratch(2, size_t(g.OCg * g.CKg));
        gemm(false, true, g.OCg, g.CKg, c1 - c0, s * g.P, s * g.P, 1.f, dyc + c0, cols + c0,
             nullptr, part);
        if (!first)
          for (int64_t i = 0; i < g.OCg * g.CKg; ++i) dst[i] += part[i];
        first = false;
      }
    }
  });
}

void run(const ChannelStatsParams& p, void* const* a) {
  float* out = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  const int64_t C = p.channels, E = p.inner, count = p.outer * E;
  pool().parallel_for(C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      double s = 0, q = 0;
      for (int64_t n = 0; n < p.outer; ++n) {
        const float* r = x + (n * C + c) * E;
        float part = 0.f;  // one row in f32, rows summed in double
        for (int64_t i = 0; i < E; ++i) part += r[i];
        s += part;
      }
      const double mean = count ? s / double(count) : 0.0;
      const float m = float(mean);
      for (int64_t n = 0; n < p.outer; ++n) {
        const float* r = x + (n * C + c) * E;
        float part = 0.f;
        for (int64_t i = 0; i < E; ++i) part += (r[i] - m) * (r[i] - m);
        q += part;
      }
      out[c] = m;
      out[C + c] = count ? float(q / double(count)) : 0.f;
    }
  });
}

// The pooled form (kernels.h): P x P windows with stride P over planes of
// width W, OH x OW of them a plane.
struct PooledAt {
  int64_t P, W, OH, OW;
  template <class Params>
  explicit PooledAt(const Params& p)
      : P(p.pool), W(p.width), OH(p.width ? p.inner / p.width / p.pool : 0), OW(p.width / p.pool) {}
  int64_t plane() const { return OH * OW; }
};

void run(const ChannelSumsParams& p, void* const* a) {
  float* out = as<float>(a[0]);
  const float *x = as<const float>(a[1]), *y = as<const float>(a[2]);
  const float* mean = as<const float>(a[3]);
  if (p.pool > 0) {  // over the windows: each adds its gradient at its index
    const PooledAt at(p);
    const int64_t C = p.channels, E = p.inner, PE = at.plane(), n = p.outer * C * PE;
    const float* ymax = as<const float>(a[4]);
    const int32_t* idx = as<const int32_t>(a[4]) + n;
    pool().parallel_for(C, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        double s = 0, q = 0;
        const float m = mean[c];
        for (int64_t o = 0; o < p.outer; ++o) {
          const int64_t r = o * C + c;
          float ps = 0.f, pq = 0.f;
          for (int64_t j = r * PE; j < (r + 1) * PE; ++j) {
            const float v = p.relu_mask && !(ymax[j] > 0.f) ? 0.f : x[j];
            ps += v, pq += v * (y[r * E + idx[j]] - m);
          }
          s += ps, q += pq;
        }
        out[c] = float(s);
        out[C + c] = float(q);
      }
    });
    return;
  }
  const float* mask = p.relu_mask ? as<const float>(a[4]) : nullptr;
  const int64_t C = p.channels, E = p.inner;
  pool().parallel_for(C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      double s = 0, q = 0;
      const float m = mean[c];
      for (int64_t n = 0; n < p.outer; ++n) {
        const int64_t at = (n * C + c) * E;
        const float *r = x + at, *t = y + at;
        float ps = 0.f, pq = 0.f;
        if (mask) {  // a where mask > 0, else +0 (bits cleared: no branch)
          const float* mk = mask + at;
          for (int64_t i = 0; i < E; ++i) {
            const uint32_t keep = 0u - uint32_t(mk[i] > 0.f);
            const float v = std::bit_cast<float>(std::bit_cast<uint32_t>(r[i]) & keep);
            ps += v, pq += v * (t[i] - m);
          }
        } else {
          for (int64_t i = 0; i < E; ++i) ps += r[i], pq += r[i] * (t[i] - m);
        }
        s += ps, q += pq;
      }
      out[c] = float(s);
      out[C + c] = float(q);
    }
  });
}

void run(const EmbeddingParams& p, void* const* a) {
  float* out = as<float>(a[0]);
  const float* w = as<const float>(a[1]);
  const int32_t* idx = as<const int32_t>(a[2]);
  const int64_t D = p.dim;
  for (int64_t i = 0; i < p.n; ++i)
    SY_CHECK(idx[i] >= 0 && idx[i] < p.num, "embedding", "expected indices in [0, ", p.num,
             "), found ", idx[i], " at position ", i);
  pfor(p.n * D, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) out[k] = w[idx[k / D] * D + k % D];
  });
}

// Each row of dw is owned by one task and summed in the order of the
// indices: the same additions, in the same order, as the GPU kernels.
void run(const EmbeddingBackwardParams& p, void* const* a) {
  float* dw = as<float>(a[0]);
  const float* dy = as<const float>(a[1]);
  const int32_t* idx = as<const int32_t>(a[2]);
  const int64_t D = p.dim, N = p.num;
  std::fill(dw, dw + N * D, 0.f);
  const int64_t tasks = std::min<int64_t>(N, int64_t(pool().active()) * 4);
  pool().parallel_for(tasks, 1, [&](int64_t lo, int64_t hi) {
    const int64_t v0 = lo * N / tasks, v1 = hi * N / tasks;  // rows [v0, v1)
    for (int64_t i = 0; i < p.n; ++i) {
      const int64_t v = idx[i];
      if (v < v0 || v >= v1) continue;
      float* row = dw + v * D;
      const float* src = dy + i * D;
      for (int64_t d = 0; d < D; ++d) row[d] += src[d];
    }
  });
}

namespace {

// One row of channel_affine, each form its own loop (selects, no branches:
// the compiler vectorizes them).
template <bool HasB, bool Mask, bool Relu>
void affine_row(float* __restrict o, const float* __restrict u, const float* __restrict v,
                const float* __restrict mk, int64_t E, const float (&k)[5]) {
  for (int64_t i = 0; i < E; ++i) {
    float ui = u[i];
    if constexpr (Mask) ui = mk[i] > 0.f ? ui : 0.f;
    float t = (ui - k[0]) * k[1] + k[2];
    if constexpr (HasB) t += (v[i] - k[3]) * k[4];
    if constexpr (Relu) t = t > 0.f ? t : 0.f;  // pointwise::unary's relu
    o[i] = t;
  }
}

using AffineRow = void (*)(float*, const float*, const float*, const float*, int64_t,
                           const float (&)[5]);
template <bool HasB, bool Mask>
AffineRow affine_row_for(bool relu) {
  return relu ? &affine_row<HasB, Mask, true> : &affine_row<HasB, Mask, false>;
}

}  // namespace

void run(const ChannelAffineParams& p, void* const* a) {
  float* y = as<float>(a[0]);
  const float *x = as<const float>(a[1]), *b = as<const float>(a[2]), *k = as<const float>(a[3]);
  if (p.pool > 0) {  // a from the windows (kernels.h's pooled form)
    // Per row: the windows' gradients scattered to their indices in a
    // thread's scratch (an element is in one window at most, and takes its
    // gradient only if it is the window's index), then the plain row loop.
    const PooledAt at(p);
    const int64_t C = p.channels, E = p.inner, PE = at.plane(), n = p.outer * C * PE;
    const float* ymax = as<const float>(a[4]);
    const int32_t* idx = as<const int32_t>(a[4]) + n;
    const AffineRow row =
        p.has_b ? affine_row_for<true, false>(p.relu) : affine_row_for<false, false>(p.relu);
    pool().parallel_for(p.outer * C, std::max<int64_t>(1, kGrain / std::max<int64_t>(E, 1)),
                        [&](int64_t lo, int64_t hi) {
                          thread_local std::vector<float> scratch;
                          scratch.resize(size_t(E));
                          float* g = scratch.data();  // TLS looked up once, not per access
                          for (int64_t r = lo; r < hi; ++r) {
                            std::fill_n(g, E, 0.f);
                            for (int64_t oh = 0, j = r * PE; oh < at.OH; ++oh)
                              for (int64_t ow = 0; ow < at.OW; ++ow, ++j) {
                                // The window's index, if it lies in the window.
                                const int64_t q = idx[j], h = oh * at.P, w = ow * at.P;
                                bool in = false;
                                for (int64_t d = 0; d < at.P; ++d)
                                  in |= uint64_t(q - ((h + d) * at.W + w)) < uint64_t(at.P);
                                if (in && (!p.relu_mask || ymax[j] > 0.f)) g[q] = x[j];
                              }
                            const int64_t c = r % C;
                            const float kc[5] = {k[c], k[C + c], k[2 * C + c],
                                                 p.has_b ? k[3 * C + c] : 0.f,
                                                 p.has_b ? k[4 * C + c] : 0.f};
                            row(y + r * E, g, p.has_b ? b + r * E : nullptr, nullptr, E, kc);
                          }
                        });
    return;
  }
  const float* mask = p.relu_mask ? as<const float>(a[4]) : nullptr;
  const int64_t C = p.channels, E = p.inner;
  const AffineRow row =
      p.has_b ? (mask ? affine_row_for<true, true>(p.relu) : affine_row_for<true, false>(p.relu))
              : (mask ? affine_row_for<false, true>(p.relu) : affine_row_for<false, false>(p.relu));
  pool().parallel_for(p.outer * C, std::max<int64_t>(1, kGrain / std::max<int64_t>(E, 1)),
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t r = lo; r < hi; ++r) {
                          const int64_t c = r % C;
                          const float kc[5] = {k[c], k[C + c], k[2 * C + c],
                                               p.has_b ? k[3 * C + c] : 0.f,
                                               p.has_b ? k[4 * C + c] : 0.f};
                          row(y + r * E, x + r * E, p.has_b ? b + r * E : nullptr,
                              mask ? mask + r * E : nullptr, E, kc);
                        }
                      });
}

// The window of output (oh, ow) clipped to the plane: rows [h0, h1), cols [w0, w1).
struct Window {
  int64_t h0, h1, w0, w1;
};
template <class P>
Window window(const P& p, int64_t oh, int64_t ow) {
  const int64_t hs = oh * p.stride[0] - p.padding[0], ws = ow * p.stride[1] - p.padding[1];
  return {std::max<int64_t>(hs, 0), std::min(hs + p.kernel[0], p.height), std::max<int64_t>(ws, 0),
          std::min(ws + p.kernel[1], p.width)};
}

// Batch norm's per-channel coefficients (kernels.h): a few floats per
// channel, in float as the GPUs compute them.
void run(const BatchNormCoefParams& p, void* const* a) {
  float* out = as<float>(a[0]);
  const float *mean = as<const float>(a[1]), *var = as<const float>(a[2]);
  const float *w = as<const float>(a[3]), *b = as<const float>(a[4]);
  const int64_t C = p.channels;
  for (int64_t c = 0; c < C; ++c) {
    const float inv = 1.f / std::sqrt(var[c] + p.eps);
    out[c] = mean[c];
    out[C + c] = p.has_weight ? inv * w[c] : inv;
    out[2 * C + c] = p.has_bias ? b[c] : 0.f;
    out[3 * C + c] = inv;
  }
}

void run(const BatchNormCoefBackwardParams& p, void* const* a) {
  float* out = as<float>(a[0]);
  const float *coef = as<const float>(a[1]), *sums = as<const float>(a[2]);
  const int64_t C = p.channels;
  const float per = 1.f / float(p.count);
  for (int64_t c = 0; c < C; ++c) {
    const float mean = coef[c], scale = coef[C + c], inv = coef[3 * C + c];
    const float dweight = inv * sums[C + c];  // the sum of dy * xhat
    out[c] = 0.f;
    out[C + c] = scale;
    out[2 * C + c] = p.training ? -(scale * sums[c] * per) : 0.f;
    out[3 * C + c] = mean;
    out[4 * C + c] = p.training ? -(scale * inv * dweight * per) : 0.f;
    out[5 * C + c] = dweight;
  }
}

void run(const BatchNormRunningParams& p, void* const* a) {
  float *rm = as<float>(a[0]), *rv = as<float>(a[1]);
  const float* stats = as<const float>(a[p.has_count ? 3 : 2]);
  if (p.has_count) ++*as<int64_t>(a[2]);
  const int64_t C = p.channels;
  const float unbias = float(p.count) / float(p.count - 1), m = p.momentum;
  // An SGD step with lr = -momentum, weight decay -1 and the statistic as
  // the gradient: r += momentum * (stat - r), as every backend computes it.
  for (int64_t c = 0; c < C; ++c) {
    pointwise::sgd_step(rm[c], stats[c], -m, -1.f);
    pointwise::sgd_step(rv[c], stats[C + c] * unbias, -m, -1.f);
  }
}

void run(const MaxPool2dParams& p, void* const* a) {
  const int64_t HW = p.height * p.width, OHW = p.out_h * p.out_w, W = p.width;
  float* y = as<float>(a[0]);
  int32_t* idx = as<int32_t>(a[0]) + p.planes * OHW;  // after the maxima
  const float* x = as<const float>(a[1]);
  const float* k = p.affine ? as<const float>(a[2]) : nullptr;
  // One task per plane; per output the window, clipped to the plane, is
  // scanned row by row. The first maximum wins; a NaN wins (the last one),
  // as in PyTorch's max pooling. With affine the values are the batch norm's
  // transform (and ReLU) of x, as the GPUs compute them.
  auto scan = [&](const float* src, int64_t pl) {
    float* yo = y + pl * OHW;
    int32_t* io = idx + pl * OHW;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      const int64_t hs = oh * p.stride[0] - p.padding[0];
      const int64_t h0 = std::max<int64_t>(hs, 0), h1 = std::min(hs + p.kernel[0], p.height);
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const int64_t ws = ow * p.stride[1] - p.padding[1];
        const int64_t w0 = std::max<int64_t>(ws, 0), w1 = std::min(ws + p.kernel[1], W);
        float best = -INFINITY;
        int64_t at = h0 * W + w0;
        bool nan = false;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t c = w0; c < w1; ++c) {  // branch-free: selects, not jumps
            const float v = src[h * W + c];
            const bool gt = v > best;
            best = gt ? v : best;
            at = gt ? h * W + c : at;
            nan |= v != v;
          }
        if (nan)  // rare: the last NaN of the window wins, as in PyTorch
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t c = w0; c < w1; ++c)
              if (const float v = src[h * W + c]; v != v) best = v, at = h * W + c;
        yo[oh * p.out_w + ow] = best;
        io[oh * p.out_w + ow] = int32_t(at);
      }
    }
  };
  auto plane = [&](int64_t pl) {
    if (!k) return scan(x + pl * HW, pl);
    // The plane transformed first, into a thread's scratch (one vectorized
    // pass; transforming inside the window scan ran it twice as slow).
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(HW));
    float* t = scratch.data();
    const float* src = x + pl * HW;
    const int64_t c = pl % p.channels, C = p.channels;
    const float k0 = k[c], k1 = k[C + c], k2 = k[2 * C + c];
    if (p.relu)
      for (int64_t i = 0; i < HW; ++i) {
        const float v = (src[i] - k0) * k1 + k2;
        t[i] = v > 0.f ? v : 0.f;
      }
    else
      for (int64_t i = 0; i < HW; ++i) t[i] = (src[i] - k0) * k1 + k2;
    scan(t, pl);
  };
  pool().parallel_for(p.planes, std::max<int64_t>(1, kGrain / (HW + 1)),
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t pl = lo; pl < hi; ++pl) plane(pl);
                      });
}

// Backward passes scatter per plane, in output order: each plane is one
// thread's, so the sums are the same every run.
void run(const MaxPool2dBackwardParams& p, void* const* a) {
  float* dx = as<float>(a[0]);
  const float* dy = as<const float>(a[1]);
  const int32_t* idx = as<const int32_t>(a[2]);
  const int64_t HW = p.height * p.width, OHW = p.out_h * p.out_w;
  pool().parallel_for(p.planes, std::max<int64_t>(1, kGrain / (HW + 1)),
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t pl = lo; pl < hi; ++pl) {
                          float* plane = dx + pl * HW;
                          std::fill_n(plane, HW, 0.f);
                          for (int64_t o = pl * OHW; o < (pl + 1) * OHW; ++o)
                            plane[idx[o]] += dy[o];
                        }
                      });
}

template <class P>
float pool_divisor(const P& p, int64_t oh, int64_t ow) {
  if (p.count_include_pad) {  // the window clipped to the padded plane, as PyTorch
    const int64_t hs = oh * p.stride[0] - p.padding[0], ws = ow * p.stride[1] - p.padding[1];
    const int64_t he = std::min(hs + p.kernel[0], p.height + p.padding[0]);
    const int64_t we = std::min(ws + p.kernel[1], p.width + p.padding[1]);
    return float((he - hs) * (we - ws));
  }
  const Window w = window(p, oh, ow);
  return float((w.h1 - w.h0) * (w.w1 - w.w0));
}

void run(const AvgPool2dParams& p, void* const* a) {
  float* y = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  const int64_t HW = p.height * p.width, OHW = p.out_h * p.out_w;
  pool().parallel_for(p.planes, std::max<int64_t>(1, kGrain / (HW + 1)),
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t pl = lo; pl < hi; ++pl)
                          for (int64_t oh = 0; oh < p.out_h; ++oh)
                            for (int64_t ow = 0; ow < p.out_w; ++ow) {
                              const Window w = window(p, oh, ow);
                              float s = 0.f;
                              for (int64_t h = w.h0; h < w.h1; ++h)
                                for (int64_t c = w.w0; c < w.w1; ++c)
                                  s += x[pl * HW + h * p.width + c];
                              y[pl * OHW + oh * p.out_w + ow] = s / pool_divisor(p, oh, ow);
                            }
                      });
}

void run(const AvgPool2dBackwardParams& p, void* const* a) {
  float* dx = as<float>(a[0]);
  const float* dy = as<const float>(a[1]);
  const int64_t HW = p.height * p.width, OHW = p.out_h * p.out_w;
  pool().parallel_for(
      p.planes, std::max<int64_t>(1, kGrain / (HW + 1)), [&](int64_t lo, int64_t hi) {
        for (int64_t pl = lo; pl < hi; ++pl) {
          float* plane = dx + pl * HW;
          std::fill_n(plane, HW, 0.f);
          for (int64_t oh = 0; oh < p.out_h; ++oh)
            for (int64_t ow = 0; ow < p.out_w; ++ow) {
              const Window w = window(p, oh, ow);
              const float g = dy[pl * OHW + oh * p.out_w + ow] / pool_divisor(p, oh, ow);
              for (int64_t h = w.h0; h < w.h1; ++h)
                for (int64_t c = w.w0; c < w.w1; ++c) plane[h * p.width + c] += g;
            }
        }
      });
}

}  // namespace switchyard::cpu_impl
