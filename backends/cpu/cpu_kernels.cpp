// SPDX-License-Identifier: MIT
// CPU kernels: the reference implementation of every kernel in the table.
// Elementwise work over large tensors is split across the thread pool.
#include "cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu_kernels_nn.h"
#include "pointwise.h"
#include "switchyard/dtype.h"
#include "switchyard/error.h"
#include "thread_pool.h"

namespace switchyard::cpu_impl {
namespace {

constexpr int64_t kGrain = kElementGrain;  // elements per chunk worth a thread wake-up

template <class F>
void pfor(int64_t n, F&& f) {
  pool().parallel_for(n, kGrain, [&](int64_t lo, int64_t hi) { f(lo, hi); });
}

// ---- Philox4x32-10, as in Salmon et al. 2011 (and cuRAND, PyTorch). --------
struct U4 {
  uint32_t v[4];
};
U4 philox(U4 c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c.v[0];
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c.v[2];
    c = {{uint32_t(p1 >> 32) ^ c.v[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c.v[3] ^ k1,
          uint32_t(p0)}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}
U4 philox_at(uint64_t seed, uint64_t off, int64_t k) {
  return philox({{uint32_t(k), uint32_t(uint64_t(k) >> 32), uint32_t(off), uint32_t(off >> 32)}},
                uint32_t(seed), uint32_t(seed >> 32));
}
constexpr float kTwoPow24 = 1.0f / 16777216.0f;

// The hot loops get an AVX2 clone next to the baseline one; the loader picks
// per machine, so one binary runs everywhere and uses wide vectors where it can.
// (Not under ThreadSanitizer: its runtime is not ready when ifunc resolvers run.)
#if defined(__SANITIZE_THREAD__)
#define SY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)  // clang's spelling
#define SY_TSAN 1
#endif
#endif
// (Windows has no ifunc, which target_clones needs.)
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(SY_TSAN) && \
    !defined(_WIN32)
#define SY_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SY_CLONES
#endif

SY_CLONES void adam_loop(int64_t lo, int64_t hi, float* __restrict w, float* __restrict m,
                         float* __restrict v, const float* __restrict g, float b1, float b2,
                         float eps, float step, float inv_sqrt_bc2, float keep, float l2) {
  for (int64_t j = lo; j < hi; ++j)
    pointwise::adam_step(w[j], m[j], v[j], g[j], b1, b2, eps, step, inv_sqrt_bc2, keep, l2);
}

SY_CLONES void sgd_loop(int64_t lo, int64_t hi, float* __restrict w, const float* __restrict g,
                        float lr, float wd) {
  for (int64_t j = lo; j < hi; ++j) pointwise::sgd_step(w[j], g[j], lr, wd);
}

SY_CLONES void sgd_momentum_loop(int64_t lo, int64_t hi, float* __restrict w, float* __restrict buf,
                                 const float* __restrict g, float lr, float mom, float damp,
                                 float wd, bool nesterov, bool first) {
  for (int64_t j = lo; j < hi; ++j)
    pointwise::sgd_momentum_step(w[j], buf[j], g[j], lr, mom, damp, wd, nesterov, first);
}

SY_CLONES void affine_loop(int64_t lo, int64_t hi, float* __restrict o, const float* __restrict x,
                           float a, float b) {
  for (int64_t j = lo; j < hi; ++j) o[j] = a * x[j] + b;
}

SY_CLONES void relu_loop(int64_t lo, int64_t hi, float* __restrict o, const float* __restrict x) {
  for (int64_t j = lo; j < hi; ++j) o[j] = x[j] > 0.f ? x[j] : 0.f;
}

SY_CLONES void relu_backward_loop(int64_t lo, int64_t hi, float* __restrict dx,
                                  const float* __restrict dy, const float* __restrict x) {
  for (int64_t j = lo; j < hi; ++j) dx[j] = x[j] > 0.f ? dy[j] : 0.f;
}

using pointwise::unary_grad;
inline float binary_apply(Binary op, float a, float b) { return pointwise::binary(op, a, b); }

template <class T>
T* as(void* p) {
  return static_cast<T*>(p);
}

template <Binary OP>
void binary_loop(const BinaryParams& p, float* out, const float* a, const float* b) {
  const int64_t *d = p.dims, *sa = p.a_strides, *sb = p.b_strides;
  const int64_t rows = d[0] * d[1] * d[2], cols = d[3];
  // Rows longer than a grain are cut into blocks of one, so a flat op (one
  // long row) runs on every thread too.
  const int64_t blocks = cols > kGrain ? (cols + kGrain - 1) / kGrain : 1;
  const int64_t width = blocks > 1 ? kGrain : cols;
  auto body = [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t r = t / blocks, j0 = t % blocks * width, j1 = std::min(cols, j0 + width);
      int64_t i0 = r / (d[1] * d[2]), i1 = (r / d[2]) % d[1], i2 = r % d[2];
      const float* pa = a + i0 * sa[0] + i1 * sa[1] + i2 * sa[2];
      const float* pb = b + i0 * sb[0] + i1 * sb[1] + i2 * sb[2];
      float* po = out + r * cols;
      if (sa[3] == 1 && sb[3] == 1)
        for (int64_t j = j0; j < j1; ++j) po[j] = binary_apply(OP, pa[j], pb[j]);
      else if (sa[3] == 1)
        for (int64_t j = j0; j < j1; ++j) po[j] = binary_apply(OP, pa[j], pb[j * sb[3]]);
      else
        for (int64_t j = j0; j < j1; ++j) po[j] = binary_apply(OP, pa[j * sa[3]], pb[j * sb[3]]);
    }
  };
  pool().parallel_for(rows * blocks, std::max<int64_t>(1, kGrain / std::max<int64_t>(width, 1)),
                      body);
}

void softmax_rows(const SoftmaxParams& p, float* out, const float* x) {
  const int64_t rows = p.rows, cols = p.cols;
  const bool log_out = p.log;
  pool().parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)),
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t r = lo; r < hi; ++r) {
                          const float* xr = x + r * cols;
                          float* yr = out + r * cols;
                          float m = *std::max_element(xr, xr + cols);
                          double s = 0;
                          for (int64_t c = 0; c < cols; ++c) s += std::exp(double(xr[c] - m));
                          if (log_out) {
                            float lse = m + float(std::log(s));
                            for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - lse;
                          } else {
                            float inv = float(1.0 / s);
                            for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - m) * inv;
                          }
                        }
                      });
}

void check_label(int32_t l, int64_t cols, int64_t row) {
  SY_CHECK(l >= 0 && l < cols, "cross_entropy", "expected labels in [0, ", cols, "), found ", l,
           " at row ", row);
}

void cast(const CastParams& p, void* out, const void* in) {
  const int64_t n = p.n;
  pointwise::with_element(p.to, [&](auto* to) {
    using T = std::remove_pointer_t<decltype(to)>;
    T* o = as<T>(out);
    pointwise::with_element(p.from, [&](auto* from) {
      using S = std::remove_pointer_t<decltype(from)>;
      const S* x = as<const S>(const_cast<void*>(in));
      pfor(n, [&](int64_t lo, int64_t hi) {
        for (int64_t k = lo; k < hi; ++k) o[k] = pointwise::convert<T>(x[k]);
      });
    });
  });
}

template <class T>
void transpose_t(int64_t R, int64_t C, T* out, const T* in) {
  constexpr int64_t B = 32;
  for (int64_t r0 = 0; r0 < R; r0 += B)
    for (int64_t c0 = 0; c0 < C; c0 += B)
      for (int64_t r = r0; r < std::min(R, r0 + B); ++r)
        for (int64_t c = c0; c < std::min(C, c0 + B); ++c) out[c * R + r] = in[r * C + c];
}

// ---- one function per kernel of the table -----------------------------------------
// run_kernel() below calls run(params, args) for each kernel; a kernel added
// to the table without its run() here fails to compile.

void run(const FillParams& p, void* const* a) {
  pointwise::with_element(p.dtype, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    const T v = pointwise::convert<T>(p.value);
    pfor(p.n, [&](int64_t lo, int64_t hi) { std::fill(as<T>(a[0]) + lo, as<T>(a[0]) + hi, v); });
  });
}

void run(const ArangeParams& p, void* const* a) {
  pointwise::with_element(p.dtype, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    T* o = as<T>(a[0]);
    for (int64_t j = 0; j < p.n; ++j) o[j] = pointwise::convert<T>(p.start + float(j) * p.step);
  });
}

void run(const RandUniformParams& p, void* const* a) {
  float* o = as<float>(a[0]);
  const float span = p.high - p.low;
  pfor(p.n, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j)
      o[j] = p.low + span * float(philox_at(p.seed, p.offset, j).v[0] >> 8) * kTwoPow24;
  });
}

void run(const DropoutParams& p, void* const* a) {
  float* o = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  pfor(p.n, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      const float u = float(philox_at(p.seed, p.offset, j).v[0] >> 8) * kTwoPow24;
      o[j] = x[j] * (u >= p.p ? p.scale : 0.f);
    }
  });
}

void run(const RandNormalParams& p, void* const* a) {
  float* o = as<float>(a[0]);
  pfor(p.n, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      U4 r = philox_at(p.seed, p.offset, j);
      float u1 = float((r.v[0] >> 8) + 1) * kTwoPow24;  // (0, 1]
      float u2 = float(r.v[1] >> 8) * kTwoPow24;
      o[j] = p.mean + p.std * std::sqrt(-2.f * std::log(u1)) * std::cos(6.283185307179586f * u2);
    }
  });
}

void run(const CastParams& p, void* const* a) { cast(p, a[0], a[1]); }

void run(const TransposeParams& p, void* const* a) {
  if (p.elem_size == 1)
    transpose_t(p.rows, p.cols, as<uint8_t>(a[0]), as<const uint8_t>(a[1]));
  else if (p.elem_size == 2)
    transpose_t(p.rows, p.cols, as<uint16_t>(a[0]), as<const uint16_t>(a[1]));
  else if (p.elem_size == 8)
    transpose_t(p.rows, p.cols, as<uint64_t>(a[0]), as<const uint64_t>(a[1]));
  else
    transpose_t(p.rows, p.cols, as<uint32_t>(a[0]), as<const uint32_t>(a[1]));
}

void run(const PadParams& p, void* const* a) {
  float* o = as<float>(a[0]);
  std::fill_n(o, p.total, 0.f);
  std::memcpy(o + p.begin, a[1], size_t(p.len) * sizeof(float));
}

void run(const GemmParams& p, void* const* a) {
  // BLAS takes int sizes and leading dimensions: refuse what would wrap.
  SY_CHECK(p.m <= INT32_MAX && p.n <= INT32_MAX && p.k <= INT32_MAX && p.lda <= INT32_MAX &&
               p.ldb <= INT32_MAX,
           "gemm", "expected dimensions below 2^31 on the CPU (BLAS takes int), found m=", p.m,
           " n=", p.n, " k=", p.k);
  const float* bias = p.has_bias ? as<const float>(a[3]) : nullptr;
  // 16-bit A and B: each product's operands widened into f32 blocks (what
  // they span with their leading dimensions), then OpenBLAS's sgemm.
  const bool half = is_half(p.ab_dtype);
  const int64_t lda = p.lda ? p.lda : (p.trans_a ? p.m : p.k);
  const int64_t ldb = p.ldb ? p.ldb : (p.trans_b ? p.k : p.n);
  const int64_t span_a =
      p.m && p.k ? ((p.trans_a ? p.k : p.m) - 1) * lda + (p.trans_a ? p.m : p.k) : 0;
  const int64_t span_b =
      p.k && p.n ? ((p.trans_b ? p.n : p.k) - 1) * ldb + (p.trans_b ? p.k : p.n) : 0;
  thread_local std::vector<float> wa, wb;  // kept: no allocation per launch once grown
  if (half) wa.resize(size_t(span_a)), wb.resize(size_t(span_b));
  auto widen = [&](const void* src, int64_t first, int64_t n, float* dst) {
    const uint16_t* h = as<const uint16_t>(const_cast<void*>(src)) + first;
    const bool bf = p.ab_dtype == DType::bf16;
    pfor(n, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j)
        dst[j] = bf ? pointwise::bf16_to_float(h[j]) : pointwise::f16_to_float(h[j]);
    });
  };
  // A 16-bit out: each product computed into an f32 block (M x N, packed),
  // bias and activation included, then rounded into place.
  const bool half_c = is_half(p.c_dtype);
  thread_local std::vector<float> wc;
  if (half_c) wc.resize(size_t(p.m * p.n));
  for (int64_t b = 0; b < std::max<int64_t>(p.batch, 1); ++b) {
    float* C = half_c ? wc.data() : as<float>(a[0]) + b * p.stride_c;
    const float* A = half ? wa.data() : as<const float>(a[1]) + b * p.stride_a;
    const float* B = half ? wb.data() : as<const float>(a[2]) + b * p.stride_b;
    if (half) {
      widen(a[1], b * p.stride_a, span_a, wa.data());
      widen(a[2], b * p.stride_b, span_b, wb.data());
    }
    gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, p.lda, p.ldb, p.alpha, A, B,
         p.bias_rows ? nullptr : bias, C);
    if (!(bias && p.bias_rows) && p.act == Unary::none && !half_c) continue;
    uint16_t* out16 = half_c ? as<uint16_t>(a[0]) + b * p.stride_c : nullptr;
    const bool bf_c = p.c_dtype == DType::bf16;
    pool().parallel_for(
        p.m, std::max<int64_t>(1, kGrain / std::max<int64_t>(p.n, 1)), [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) {
            float* c = C + i * p.n;
            const float add = bias && p.bias_rows ? bias[b * p.m + i] : 0.f;
            if (add != 0.f)
              for (int64_t j = 0; j < p.n; ++j) c[j] += add;
            if (p.act != Unary::none)
              for (int64_t j = 0; j < p.n; ++j) c[j] = unary_apply(p.act, c[j]);
            if (!out16) continue;
            uint16_t* o = out16 + i * p.n;
            for (int64_t j = 0; j < p.n; ++j)
              o[j] = bf_c ? pointwise::float_to_bf16(c[j]) : pointwise::float_to_f16(c[j]);
          }
        });
  }
}

void run(const BinaryParams& p, void* const* a) {
  float* o = as<float>(a[0]);
  const float *x = as<const float>(a[1]), *y = as<const float>(a[2]);
  switch (p.op) {
#define SY_BINARY_CASE(name)               \
  case Binary::name:                       \
    binary_loop<Binary::name>(p, o, x, y); \
    break;
    SWITCHYARD_BINARY_OPS(SY_BINARY_CASE)
#undef SY_BINARY_CASE
  }
}

void run(const AffineParams& p, void* const* a) {
  float* o = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  pfor(p.n, [&](int64_t lo, int64_t hi) { affine_loop(lo, hi, o, x, p.scale, p.shift); });
}

void run(const UnaryParams& p, void* const* a) {
  float* o = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  pfor(p.n, [&](int64_t lo, int64_t hi) {
    if (p.op == Unary::relu)
      relu_loop(lo, hi, o, x);
    else
      for (int64_t j = lo; j < hi; ++j) o[j] = unary_apply(p.op, x[j]);
  });
}

void run(const UnaryBackwardParams& p, void* const* a) {
  float* dx = as<float>(a[0]);
  const float *dy = as<const float>(a[1]), *x = as<const float>(a[2]), *y = as<const float>(a[3]);
  pfor(p.n, [&](int64_t lo, int64_t hi) {
    if (p.op == Unary::relu)
      relu_backward_loop(lo, hi, dx, dy, x);
    else
      for (int64_t j = lo; j < hi; ++j) dx[j] = dy[j] * unary_grad(p.op, x[j], y[j]);
  });
}

void run(const ReduceSumParams& p, void* const* a) {
  const int64_t outer = p.outer, len = p.len, inner = p.inner;
  float* o = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  if (inner == 1) {
    pool().parallel_for(outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(len, 1)),
                        [&](int64_t lo, int64_t hi) {
                          for (int64_t r = lo; r < hi; ++r) {
                            double s = 0;
                            for (int64_t l = 0; l < len; ++l) s += x[r * len + l];
                            o[r] = float(s) * p.scale;
                          }
                        });
    return;
  }
  pool().parallel_for(inner, std::max<int64_t>(64, kGrain / std::max<int64_t>(len * outer, 1)),
                      [&](int64_t lo, int64_t hi) {
                        std::vector<double> acc(size_t(hi - lo));
                        for (int64_t ob = 0; ob < outer; ++ob) {
                          std::fill(acc.begin(), acc.end(), 0.0);
                          for (int64_t l = 0; l < len; ++l) {
                            const float* row = x + (ob * len + l) * inner;
                            for (int64_t i = lo; i < hi; ++i) acc[size_t(i - lo)] += row[i];
                          }
                          for (int64_t i = lo; i < hi; ++i)
                            o[ob * inner + i] = float(acc[size_t(i - lo)]) * p.scale;
                        }
                      });
}

void run(const ExpandParams& p, void* const* a) {
  float* o = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  for (int64_t ob = 0; ob < p.outer; ++ob)
    for (int64_t l = 0; l < p.len; ++l)
      for (int64_t i = 0; i < p.inner; ++i)
        o[(ob * p.len + l) * p.inner + i] = p.scale * x[ob * p.inner + i];
}

void run(const SoftmaxParams& p, void* const* a) {
  softmax_rows(p, as<float>(a[0]), as<const float>(a[1]));
}

void run(const SoftmaxBackwardParams& p, void* const* a) {
  const int64_t rows = p.rows, cols = p.cols;
  float* dx = as<float>(a[0]);
  const float *dy = as<const float>(a[1]), *y = as<const float>(a[2]);
  for (int64_t r = 0; r < rows; ++r) {
    const float *g = dy + r * cols, *yr = y + r * cols;
    float* d = dx + r * cols;
    double s = 0;
    if (!p.log) {
      for (int64_t c = 0; c < cols; ++c) s += double(g[c]) * yr[c];
      for (int64_t c = 0; c < cols; ++c) d[c] = yr[c] * (g[c] - float(s));
    } else {
      for (int64_t c = 0; c < cols; ++c) s += g[c];
      for (int64_t c = 0; c < cols; ++c) d[c] = g[c] - std::exp(yr[c]) * float(s);
    }
  }
}

void run(const CrossEntropyParams& p, void* const* a) {
  const int64_t rows = p.rows, cols = p.cols;
  const float* x = as<const float>(a[1]);
  const int32_t* lab = as<const int32_t>(a[2]);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    check_label(lab[r], cols, r);
    const float* xr = x + r * cols;
    float m = *std::max_element(xr, xr + cols);
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(double(xr[c] - m));
    total += double(m) + std::log(s) - double(xr[lab[r]]);
  }
  as<float>(a[0])[0] = float(total / double(rows));
}

void run(const CrossEntropyBackwardParams& p, void* const* a) {
  const int64_t rows = p.rows, cols = p.cols;
  float* dx = as<float>(a[0]);
  const float* x = as<const float>(a[1]);
  const int32_t* lab = as<const int32_t>(a[2]);
  float scale = as<const float>(a[3])[0] / float(rows);
  for (int64_t r = 0; r < rows; ++r) check_label(lab[r], cols, r);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* d = dx + r * cols;
    float m = *std::max_element(xr, xr + cols);
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(double(xr[c] - m));
    float inv = float(1.0 / s);
    for (int64_t c = 0; c < cols; ++c) d[c] = std::exp(xr[c] - m) * inv * scale;
    d[lab[r]] -= scale;
  }
}

void run(const ArgmaxParams& p, void* const* a) {
  const int64_t cols = p.cols;
  const float* x = as<const float>(a[1]);
  for (int64_t r = 0; r < p.rows; ++r)
    as<int32_t>(a[0])[r] =
        int32_t(std::max_element(x + r * cols, x + (r + 1) * cols) - (x + r * cols));
}

// The CPU device runs a user's kernel itself (cpu_device.cpp's run_custom),
// with the argument sizes this entry point does not have.
[[noreturn]] void run(const CustomParams&, void* const*) {
  throw Error("[custom] expected the CPU device to run custom kernels itself (internal error)");
}

void run(const SgdParams& p, void* const* a) {
  float* w = as<float>(a[0]);
  const float* g = as<const float>(a[1]);
  pfor(p.n, [&](int64_t lo, int64_t hi) { sgd_loop(lo, hi, w, g, p.lr, p.weight_decay); });
}

void run(const SgdMomentumParams& p, void* const* a) {
  float* w = as<float>(a[0]);
  float* buf = as<float>(a[1]);
  const float* g = as<const float>(a[2]);
  pfor(p.n, [&](int64_t lo, int64_t hi) {
    sgd_momentum_loop(lo, hi, w, buf, g, p.lr, p.momentum, p.dampening, p.weight_decay, p.nesterov,
                      p.first_step);
  });
}

// Adam's per-launch constants for step count t.
struct AdamConsts {
  float step, inv_sqrt_bc2, keep, l2;
  template <class P>
  AdamConsts(const P& p, float t) {
    const float bc1 = 1.f - std::pow(p.beta1, t), bc2 = 1.f - std::pow(p.beta2, t);
    step = p.lr / bc1, inv_sqrt_bc2 = 1.f / std::sqrt(bc2);
    // AdamW scales the weights; Adam adds wd*w to the gradient.
    keep = p.decoupled ? 1.f - p.lr * p.weight_decay : 1.f;
    l2 = p.decoupled ? 0.f : p.weight_decay;
  }
};

void run(const AdamParams& p, void* const* a) {
  float* __restrict w = as<float>(a[0]);
  float* __restrict m = as<float>(a[1]);
  float* __restrict v = as<float>(a[2]);
  const float* __restrict g = as<const float>(a[3]);
  const AdamConsts k(p, as<const float>(a[4])[0]);
  pfor(p.n, [&](int64_t lo, int64_t hi) {
    adam_loop(lo, hi, w, m, v, g, p.beta1, p.beta2, p.eps, k.step, k.inv_sqrt_bc2, k.keep, k.l2);
  });
}

void run(const AdamMultiParams&, void* const*) {
  throw Error(
      "[adam_multi] expected its arguments' sizes (run_multi), found none (internal error)");
}
void run(const SgdMultiParams&, void* const*) {
  throw Error("[sgd_multi] expected its arguments' sizes (run_multi), found none (internal error)");
}

// Pieces of kGrain elements of each of T tensors (tensor t has bytes[W*t]
// / 4 elements), run in parallel: f(t, lo, hi).
template <class F>
void over_pieces(int64_t T, int W, const uint64_t* bytes, F f) {
  struct Piece {
    int64_t t, lo, hi;
  };
  std::vector<Piece> pieces;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n = int64_t(bytes[W * t] / 4);
    for (int64_t lo = 0; lo < n; lo += kGrain) pieces.push_back({t, lo, std::min(n, lo + kGrain)});
  }
  pool().parallel_for(int64_t(pieces.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      f(pieces[size_t(i)].t, pieces[size_t(i)].lo, pieces[size_t(i)].hi);
  });
}

void run_multi(const SgdMultiParams& p, void* const* a, const uint64_t* bytes) {
  const int64_t T = p.tensors;
  const int W = p.has_buf ? 2 : 1;  // written per tensor: p[, buf]
  over_pieces(T, W, bytes, [&](int64_t t, int64_t lo, int64_t hi) {
    float* w = as<float>(a[W * t]);
    const float* g = as<const float>(a[W * T + t]);
    if (p.has_buf)
      sgd_momentum_loop(lo, hi, w, as<float>(a[W * t + 1]), g, p.lr, p.momentum, p.dampening,
                        p.weight_decay, p.nesterov, p.first_step);
    else
      sgd_loop(lo, hi, w, g, p.lr, p.weight_decay);
  });
}

// Every tensor's step count incremented first (the updates use the new
// value), then one parallel pass over pieces of every tensor.
void run_multi(const AdamMultiParams& p, void* const* a, const uint64_t* bytes) {
  const int64_t T = p.tensors;
  std::vector<AdamConsts> consts;
  consts.reserve(size_t(T));
  for (int64_t t = 0; t < T; ++t) {
    float& step = as<float>(a[4 * t + 3])[0];
    step += 1.f;
    consts.emplace_back(p, step);
  }
  over_pieces(T, 4, bytes, [&](int64_t t, int64_t lo, int64_t hi) {
    const AdamConsts& k = consts[size_t(t)];
    adam_loop(lo, hi, as<float>(a[4 * t]), as<float>(a[4 * t + 1]), as<float>(a[4 * t + 2]),
              as<const float>(a[4 * T + t]), p.beta1, p.beta2, p.eps, k.step, k.inv_sqrt_bc2,
              k.keep, k.l2);
  });
}

}  // namespace

float unary_apply(Unary op, float x) { return pointwise::unary(op, x); }

void run_multi_kernel(const KernelParams& prm, void* const* a, const uint64_t* bytes) {
  if (prm.kernel() == Kernel::sgd_multi) return run_multi(prm.get<SgdMultiParams>(), a, bytes);
  SY_CHECK(prm.kernel() == Kernel::adam_multi, kernel_name(prm.kernel()),
           "expected a multi-tensor kernel, found another (internal error)");
  run_multi(prm.get<AdamMultiParams>(), a, bytes);
}

void run_kernel(const KernelParams& prm, void* const* a) {
  switch (prm.kernel()) {
#define SY_RUN(kernel, Params, ...) \
  case Kernel::kernel:              \
    return run(prm.get<Params>(), a);
    SWITCHYARD_KERNELS(SY_RUN)
#undef SY_RUN
  }
  throw Error(detail::cat("[execute] unknown kernel id ", int(prm.kernel()), " on cpu"));
}

}  // namespace switchyard::cpu_impl
