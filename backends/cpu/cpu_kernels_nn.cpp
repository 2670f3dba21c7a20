// SPDX-License-Identifier: MIT
// The CPU's layer kernels (see cpu_kernels_nn.h), over the thread pool.
#include "cpu_kernels_nn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "switchyard/error.h"
#include "thread_pool.h"

namespace switchyard::cpu_impl {
namespace {

constexpr int64_t kGrain = 1 << 15;  // elements per chunk worth a thread wake-up

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

void run(const Im2colParams& p, void* const* a) {
  float* cols = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  const int64_t K0 = p.kernel[0], K1 = p.kernel[1], OH = p.out_h, OW = p.out_w;
  const int64_t H = p.height, Wd = p.width, N = p.batch, ncols = N * OH * OW;
  // One task per (row, sample): a row is one (channel, kh, kw).
  pool().parallel_for(
      p.channels * K0 * K1 * N, std::max<int64_t>(1, kGrain / (OH * OW + 1)),
      [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t) {
          const int64_t row = t / N, n = t % N;
          const int64_t c = row / (K0 * K1), kh = row / K1 % K0, kw = row % K1;
          float* dst = cols + row * ncols + n * OH * OW;
          const float* plane = x + (n * p.channels + c) * H * Wd;
          const TapRange rw = tap_range(Wd, OW, p.stride[1], p.padding[1], kw * p.dilation[1]);
          for (int64_t oh = 0; oh < OH; ++oh, dst += OW) {
            const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
            if (ih < 0 || ih >= H) {
              std::fill_n(dst, OW, 0.f);
              continue;
            }
            const int64_t base = ih * Wd - p.padding[1] + kw * p.dilation[1];
            std::fill_n(dst, rw.lo, 0.f);
            if (p.stride[1] == 1 && rw.hi > rw.lo)
              std::memcpy(dst + rw.lo, plane + base + rw.lo, size_t(rw.hi - rw.lo) * 4);
            else
              for (int64_t ow = rw.lo; ow < rw.hi; ++ow) dst[ow] = plane[base + ow * p.stride[1]];
            std::fill(dst + rw.hi, dst + OW, 0.f);
          }
        }
      });
}

void run(const Col2imParams& p, void* const* a) {
  float* dx = as<float>(a[0]);
  const float* cols = as<const float>(a[1]);
  const int64_t K0 = p.kernel[0], K1 = p.kernel[1], OH = p.out_h, OW = p.out_w;
  const int64_t H = p.height, Wd = p.width, N = p.batch, ncols = N * OH * OW;
  // One task per (sample, channel) plane, adding its taps in a fixed order:
  // deterministic, and each plane is written by one thread.
  pool().parallel_for(N * p.channels, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / p.channels, c = t % p.channels;
      float* plane = dx + t * H * Wd;
      std::fill_n(plane, H * Wd, 0.f);
      for (int64_t kh = 0; kh < K0; ++kh)
        for (int64_t kw = 0; kw < K1; ++kw) {
          const float* src = cols + ((c * K0 + kh) * K1 + kw) * ncols + n * OH * OW;
          const TapRange rh = tap_range(H, OH, p.stride[0], p.padding[0], kh * p.dilation[0]);
          const TapRange rw = tap_range(Wd, OW, p.stride[1], p.padding[1], kw * p.dilation[1]);
          for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
            const int64_t base = (oh * p.stride[0] - p.padding[0] + kh * p.dilation[0]) * Wd -
                                 p.padding[1] + kw * p.dilation[1];
            const float* s = src + oh * OW;
            for (int64_t ow = rw.lo; ow < rw.hi; ++ow) plane[base + ow * p.stride[1]] += s[ow];
          }
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

void run(const ChannelSumsParams& p, void* const* a) {
  float* out = as<float>(a[0]);
  const float *x = as<const float>(a[1]), *y = as<const float>(a[2]);
  const float* mean = as<const float>(a[3]);
  const int64_t C = p.channels, E = p.inner;
  pool().parallel_for(C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      double s = 0, q = 0;
      const float m = mean[c];
      for (int64_t n = 0; n < p.outer; ++n) {
        const float *r = x + (n * C + c) * E, *t = y + (n * C + c) * E;
        float ps = 0.f, pq = 0.f;
        for (int64_t i = 0; i < E; ++i) ps += r[i], pq += r[i] * (t[i] - m);
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
  const int64_t tasks = std::min<int64_t>(N, int64_t(pool().size()) * 4);
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

void run(const ChannelAffineParams& p, void* const* a) {
  float* y = as<float>(a[0]);
  const float *x = as<const float>(a[1]), *b = as<const float>(a[2]), *k = as<const float>(a[3]);
  const int64_t C = p.channels, E = p.inner;
  pool().parallel_for(p.outer * C, std::max<int64_t>(1, kGrain / std::max<int64_t>(E, 1)),
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t r = lo; r < hi; ++r) {
                          const int64_t c = r % C;
                          const float c0 = k[c], s1 = k[C + c], s2 = k[2 * C + c];
                          float* o = y + r * E;
                          const float* u = x + r * E;
                          if (p.has_b) {
                            const float c3 = k[3 * C + c], s4 = k[4 * C + c];
                            const float* v = b + r * E;
                            for (int64_t i = 0; i < E; ++i)
                              o[i] = (u[i] - c0) * s1 + s2 + (v[i] - c3) * s4;
                          } else {
                            for (int64_t i = 0; i < E; ++i) o[i] = (u[i] - c0) * s1 + s2;
                          }
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

void run(const MaxPool2dParams& p, void* const* a) {
  const int64_t HW = p.height * p.width, OHW = p.out_h * p.out_w, W = p.width;
  float* y = as<float>(a[0]);
  int32_t* idx = as<int32_t>(a[0]) + p.planes * OHW;  // after the maxima
  const float* x = as<const float>(a[1]);
  // One task per plane; per output the window, clipped to the plane, is
  // scanned row by row. The first maximum wins; a NaN wins (the last one),
  // as in PyTorch's max pooling.
  auto plane = [&](int64_t pl) {
    const float* src = x + pl * HW;
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
              if (src[h * W + c] != src[h * W + c]) best = src[h * W + c], at = h * W + c;
        yo[oh * p.out_w + ow] = best;
        io[oh * p.out_w + ow] = int32_t(at);
      }
    }
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
