// SPDX-License-Identifier: MIT
// The conformance cases and their double-precision references (see
// conformance_cases.h).
#include "conformance_cases.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <numbers>
#include <numeric>

#include "conformance_util.h"

using sy::Kernel;

namespace conformance {
namespace {

const std::vector<int64_t> kSizes = {1, 3, 17, 255, 1000};

const char* unary_name(int op) {
  static const char* names[] = {
#define SY_NAME(name) #name,
      SWITCHYARD_UNARY_OPS(SY_NAME)};
  return names[op];
}
const char* binary_name(int op) {
  static const char* names[] = {SWITCHYARD_BINARY_OPS(SY_NAME)};
#undef SY_NAME
  return names[op];
}

// ---- references -------------------------------------------------------------------
uint64_t philox_word(uint64_t k, uint32_t seed_lo, uint32_t seed_hi, uint64_t off, int which) {
  uint32_t c[4] = {uint32_t(k), uint32_t(k >> 32), uint32_t(off), uint32_t(off >> 32)};
  uint32_t k0 = seed_lo, k1 = seed_hi;
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    uint32_t n[4] = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1,
                     uint32_t(p0)};
    std::memcpy(c, n, sizeof c);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c[which];
}

double unary_ref(int op, double x) {
  switch (sy::Unary(op)) {
    case sy::Unary::relu:
      return x > 0 ? x : 0;
    case sy::Unary::gelu:
      return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case sy::Unary::tanh:
      return std::tanh(x);
    case sy::Unary::sigmoid:
      return 1 / (1 + std::exp(-x));
    case sy::Unary::exp:
      return std::exp(x);
    case sy::Unary::log:
      return std::log(x);
    case sy::Unary::sqrt:
      return std::sqrt(x);
    case sy::Unary::square:
      return x * x;
    case sy::Unary::abs:
      return std::fabs(x);
    case sy::Unary::nonfinite:
      return std::isfinite(x) ? 0 : 1;
    case sy::Unary::none:
      return x;
  }
  return x;
}

double unary_grad_ref(int op, double x, double y) {
  switch (sy::Unary(op)) {
    case sy::Unary::relu:
      return x > 0 ? 1 : 0;
    case sy::Unary::gelu: {
      const double c = 0.7978845608028654;
      double t = std::tanh(c * (x + 0.044715 * x * x * x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
    }
    case sy::Unary::tanh:
      return 1 - y * y;
    case sy::Unary::sigmoid:
      return y * (1 - y);
    case sy::Unary::exp:
      return y;
    case sy::Unary::log:
      return 1 / x;
    case sy::Unary::sqrt:
      return 0.5 / y;
    case sy::Unary::square:
      return 2 * x;
    case sy::Unary::abs:
      return x > 0 ? 1 : (x < 0 ? -1 : 0);
    case sy::Unary::nonfinite:
      return 0;
    case sy::Unary::none:
      return 1;
  }
  return 1;
}

// Inputs in the op's domain (log and sqrt need positive values); for
// nonfinite, infinities and NaNs among them.
std::vector<float> unary_input(int op, int64_t n, uint32_t seed) {
  bool pos = op == int(sy::Unary::log) || op == int(sy::Unary::sqrt);
  auto x = random_vec(size_t(n), seed, pos ? 0.1f : -3.f, 3.f);
  if (op == int(sy::Unary::nonfinite))
    for (size_t j = 1; j < x.size(); j += 3) x[j] = j % 2 ? INFINITY : j % 4 == 0 ? NAN : -INFINITY;
  return x;
}

}  // namespace

// ---- cases per kernel ---------------------------------------------------------------
std::vector<Case> cases_for(Kernel k) {
  std::vector<Case> cs;
  switch (k) {
    case Kernel::fill:
    case Kernel::arange:
    case Kernel::cast:
    case Kernel::transpose:
      return element_cases(k);
    case Kernel::rand_uniform:
    case Kernel::rand_normal:
      for (int64_t n : kSizes) {
        uint64_t off = (uint64_t(5) << 32) + 77;
        std::vector<double> e(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) {
          double u1 = double((philox_word(uint64_t(j), 1234, 99, off, 0) >> 8) +
                             (k == Kernel::rand_normal)) /
                      16777216.0;
          double u2 = double(philox_word(uint64_t(j), 1234, 99, off, 1) >> 8) / 16777216.0;
          e[size_t(j)] = k == Kernel::rand_uniform ? -2.0 + 4.0 * u1
                                                   : 0.5 + 2.0 * std::sqrt(-2 * std::log(u1)) *
                                                               std::cos(2 * std::numbers::pi * u2);
        }
        const uint64_t seed = (uint64_t(99) << 32) | 1234;
        Case c = k == Kernel::rand_uniform
                     ? make(sz({n}), {outf(e)},
                            sy::RandUniformParams{
                                .n = n, .seed = seed, .offset = off, .low = -2.f, .high = 2.f})
                     : make(sz({n}), {outf(e)},
                            sy::RandNormalParams{
                                .n = n, .seed = seed, .offset = off, .mean = 0.5f, .std = 2.f});
        c.bound = 1e-9;
        cs.push_back(c);
      }
      break;
    case Kernel::dropout:
      // rand_uniform's stream: the mask of u >= p, bit for bit on every device.
      for (int64_t n : kSizes)
        for (float p : {0.25f, 0.5f}) {
          const uint64_t off = (uint64_t(5) << 32) + 77, seed = (uint64_t(99) << 32) | 1234;
          auto x = random_vec(size_t(n), 71);
          const float scale = 1.f / (1.f - p);
          std::vector<double> e(static_cast<size_t>(n));
          for (int64_t j = 0; j < n; ++j) {
            const double u = double(philox_word(uint64_t(j), 1234, 99, off, 0) >> 8) / 16777216.0;
            e[size_t(j)] = double(x[size_t(j)] * (u >= double(p) ? scale : 0.f));
          }
          Case c =
              make(sz({n}) + " p" + std::to_string(p), {outf(e), f32(x)},
                   sy::DropoutParams{.n = n, .seed = seed, .offset = off, .p = p, .scale = scale});
          c.bound = 1e-9;
          cs.push_back(c);
        }
      break;
    case Kernel::pad:
      for (auto [total, lo, len] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
               {1, 0, 1}, {3, 0, 3}, {17, 16, 1}, {255, 17, 100}, {1000, 17, 255}}) {
        auto v = random_vec(size_t(len), 9);
        std::vector<double> e(static_cast<size_t>(total), 0.0);
        for (int64_t j = 0; j < len; ++j) e[size_t(lo + j)] = v[size_t(j)];
        cs.push_back(make(sz({total, lo, len}), {outf(e), f32(v)},
                          sy::PadParams{.begin = lo, .len = len, .total = total}));
      }
      break;
    case Kernel::gemm: {
      std::vector<std::array<int64_t, 3>> shapes = {
          {1, 1, 1},     {3, 17, 5},      {17, 255, 3},    {64, 64, 64},
          {63, 65, 17},  {128, 128, 128}, {129, 127, 130}, {255, 17, 1000},
          {1000, 3, 17}, {128, 256, 784}, {7, 24, 20000}};  // K past llvmpipe's loop budget: split
                                                            // into parts on Vulkan
      for (auto [M, N, K] : shapes)
        for (int t = 0; t < 4; ++t) {
          bool ta = t & 1, tb = t & 2;
          bool bias = (M + t) % 2 == 0;
          int act = t == 3 ? int(sy::Unary::relu) : (t == 1 && M == 17 ? int(sy::Unary::tanh) : 0);
          float alpha = t == 2 ? 0.5f : 1.f;
          auto A = random_vec(size_t(M * K), uint32_t(M + K));
          auto B = random_vec(size_t(K * N), uint32_t(N * 3 + K));
          auto bv = random_vec(size_t(N), 4);
          std::vector<double> e(static_cast<size_t>(M * N));
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double s = 0;
              for (int64_t q = 0; q < K; ++q)
                s += double(ta ? A[size_t(q * M + m)] : A[size_t(m * K + q)]) *
                     double(tb ? B[size_t(n * K + q)] : B[size_t(q * N + n)]);
              s = alpha * s + (bias ? bv[size_t(n)] : 0.0);
              e[size_t(m * N + n)] = unary_ref(act, s);
            }
          std::vector<HostArg> args = {outf(e), f32(A), f32(B)};
          if (bias) args.push_back(f32(bv));
          cs.push_back(make(sz({M, N, K}) + (ta ? " At" : "") + (tb ? " Bt" : "") +
                                (bias ? " +bias" : "") +
                                (act ? std::string(" ") + unary_name(act) : ""),
                            args,
                            sy::GemmParams{.m = M,
                                           .n = N,
                                           .k = K,
                                           .trans_a = ta,
                                           .trans_b = tb,
                                           .has_bias = bias,
                                           .act = sy::Unary(act),
                                           .batch = 1,
                                           .alpha = alpha}));
          // Views: every operand 4 or 12 bytes into its buffer, so none is
          // 16-byte aligned (GPU GEMM libraries pick kernels by alignment).
          if (bias && (M == 17 || M == 64 || M == 128) && t != 1) {
            Case v = cs.back();
            v.name += t == 2 ? " views+12" : " views+4";
            v.offset = t == 2 ? 12 : 4;
            cs.push_back(v);
          }
        }
      // Batched: B products, A shared (stride 0) or not, the bias per column
      // or per row of each product (a grouped convolution's channels).
      for (auto [B, M, N, K] : std::vector<std::array<int64_t, 4>>{{2, 1, 1, 1},
                                                                   {3, 17, 5, 3},
                                                                   {4, 16, 196, 72},
                                                                   {2, 65, 63, 129},
                                                                   {5, 3, 255, 17},
                                                                   {2, 5, 9, 17000}})
        for (int t = 0; t < 4; ++t) {
          const bool ta = t & 1, tb = t & 2, shared_a = t == 1, rows = t >= 2;
          const int64_t sa = shared_a ? 0 : M * K;
          auto A = random_vec(size_t(shared_a ? M * K : B * M * K), uint32_t(B + M));
          auto Bm = random_vec(size_t(B * K * N), uint32_t(N + K));
          auto bv = random_vec(size_t(rows ? B * M : N), 5);
          std::vector<double> e(size_t(B * M * N));
          for (int64_t b = 0; b < B; ++b)
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                double acc = 0;
                for (int64_t q = 0; q < K; ++q)
                  acc += double(A[size_t(b * sa + (ta ? q * M + m : m * K + q))]) *
                         double(Bm[size_t(b * K * N + (tb ? n * K + q : q * N + n))]);
                acc += bv[size_t(rows ? b * M + m : n)];
                e[size_t((b * M + m) * N + n)] =
                    t == 3 ? unary_ref(int(sy::Unary::relu), acc) : acc;
              }
          cs.push_back(make("batch " + sz({B, M, N, K}) + (ta ? " At" : "") + (tb ? " Bt" : "") +
                                (shared_a ? " shared A" : "") + (rows ? " +row bias" : " +bias") +
                                (t == 3 ? " relu" : ""),
                            {outf(e), f32(A), f32(Bm), f32(bv)},
                            sy::GemmParams{.m = M,
                                           .n = N,
                                           .k = K,
                                           .trans_a = ta,
                                           .trans_b = tb,
                                           .has_bias = true,
                                           .act = t == 3 ? sy::Unary::relu : sy::Unary::none,
                                           .bias_rows = rows,
                                           .batch = B,
                                           .stride_a = sa,
                                           .stride_b = K * N,
                                           .stride_c = M * N,
                                           .alpha = 1.f}));
        }
      // Row strides wider than the operands: K split into batched products
      // over column blocks of A (lda) and of B stored transposed (ldb), as a
      // convolution's weight gradient does; and B with padded rows.
      for (auto [S, M, N, K, tb] :
           std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>>{
               {3, 5, 7, 9, true},
               {4, 64, 288, 196, true},
               {2, 17, 65, 33, false},
               {1, 3, 4, 5, false}}) {
        const int64_t lda = S * K, ldb = tb ? S * K : N + 3;
        auto A = random_vec(size_t(M * lda), uint32_t(M + 7));
        auto Bm = random_vec(size_t(tb ? N * ldb : S * K * ldb), uint32_t(N + 9));
        const int64_t sb = tb ? K : K * ldb;
        std::vector<double> e(size_t(S * M * N));
        for (int64_t b = 0; b < S; ++b)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double acc = 0;
              for (int64_t q = 0; q < K; ++q)
                acc += double(A[size_t(b * K + m * lda + q)]) *
                       double(Bm[size_t(b * sb + (tb ? n * ldb + q : q * ldb + n))]);
              e[size_t((b * M + m) * N + n)] = acc;
            }
        cs.push_back(make("split " + sz({S, M, N, K}) + (tb ? " Bt" : " B padded"),
                          {outf(e), f32(A), f32(Bm)},
                          sy::GemmParams{.m = M,
                                         .n = N,
                                         .k = K,
                                         .trans_b = tb,
                                         .batch = S,
                                         .stride_a = K,
                                         .stride_b = sb,
                                         .stride_c = M * N,
                                         .lda = lda,
                                         .ldb = ldb,
                                         .alpha = 1.f}));
      }
      for (Case& c : half_gemm_cases()) cs.push_back(std::move(c));
      break;
    }
    case Kernel::embedding:
    case Kernel::embedding_backward:
    case Kernel::channel_stats:
    case Kernel::channel_sums:
    case Kernel::channel_affine:
    case Kernel::batch_norm_coef:
    case Kernel::batch_norm_coef_backward:
    case Kernel::batch_norm_running:
    case Kernel::swap_axes:
    case Kernel::im2col:
    case Kernel::col2im:
    case Kernel::conv2d:
    case Kernel::conv2d_backward_input:
    case Kernel::conv2d_backward_weight:
    case Kernel::max_pool2d:
    case Kernel::max_pool2d_backward:
    case Kernel::avg_pool2d:
    case Kernel::avg_pool2d_backward:
      return layer_cases(k);
    case Kernel::binary: {
      // (out dims, a strides, b strides)
      struct B {
        std::array<int64_t, 4> d, sa, sb;
      };
      std::vector<B> shapes;
      for (int64_t n : kSizes) shapes.push_back({{1, 1, 1, n}, {0, 0, 0, 1}, {0, 0, 0, 1}});
      shapes.push_back({{1, 1, 17, 255}, {0, 0, 255, 1}, {0, 0, 0, 1}});   // a + row vector
      shapes.push_back({{1, 1, 17, 3}, {0, 0, 3, 1}, {0, 0, 1, 0}});       // a + column
      shapes.push_back({{1, 1, 3, 1000}, {0, 0, 1000, 1}, {0, 0, 0, 0}});  // a + scalar
      shapes.push_back({{2, 5, 3, 4}, {0, 0, 4, 1}, {12, 0, 0, 1}});       // both broadcast
      shapes.push_back({{3, 5, 2, 40}, {400, 80, 40, 1}, {0, 40, 0, 1}});  // b along dims 1, 3
      for (auto& s : shapes)
        for (int op = 0; op < sy::kNumBinary; ++op) {
          int64_t n = s.d[0] * s.d[1] * s.d[2] * s.d[3];
          auto extent = [&](const std::array<int64_t, 4>& st) {
            int64_t e = 1;
            for (int j = 0; j < 4; ++j) e += (s.d[size_t(j)] - 1) * st[size_t(j)];
            return e;
          };
          auto a = random_vec(size_t(extent(s.sa)), uint32_t(op + 1), -2.f, 2.f);
          auto b = random_vec(size_t(extent(s.sb)), uint32_t(op + 50), 0.5f, 2.f);
          if (op >= int(sy::Binary::eq))  // comparisons: many ties
            for (size_t j = 0; j < a.size(); ++j)
              a[j] = float(j % 3), b[j % b.size()] = float(j % 2);
          std::vector<double> e(static_cast<size_t>(n));
          for (int64_t j = 0; j < n; ++j) {
            int64_t i3 = j % s.d[3], r = j / s.d[3], i2 = r % s.d[2];
            r /= s.d[2];
            int64_t i1 = r % s.d[1], i0 = r / s.d[1];
            double x = a[size_t(i0 * s.sa[0] + i1 * s.sa[1] + i2 * s.sa[2] + i3 * s.sa[3])];
            double y = b[size_t(i0 * s.sb[0] + i1 * s.sb[1] + i2 * s.sb[2] + i3 * s.sb[3])];
            double v = 0;
            switch (sy::Binary(op)) {
              case sy::Binary::add:
                v = x + y;
                break;
              case sy::Binary::sub:
                v = x - y;
                break;
              case sy::Binary::mul:
                v = x * y;
                break;
              case sy::Binary::div:
                v = x / y;
                break;
              case sy::Binary::eq:
                v = x == y;
                break;
              case sy::Binary::ne:
                v = x != y;
                break;
              case sy::Binary::lt:
                v = x < y;
                break;
              case sy::Binary::le:
                v = x <= y;
                break;
              case sy::Binary::gt:
                v = x > y;
                break;
              case sy::Binary::ge:
                v = x >= y;
                break;
            }
            e[size_t(j)] = v;
          }
          sy::BinaryParams bp{.op = sy::Binary(op)};
          for (int j = 0; j < 4; ++j)
            bp.dims[j] = s.d[size_t(j)], bp.a_strides[j] = s.sa[size_t(j)],
            bp.b_strides[j] = s.sb[size_t(j)];
          cs.push_back(
              make(std::string(binary_name(op)) + " " + sz({s.d[0], s.d[1], s.d[2], s.d[3]}),
                   {outf(e), f32(a), f32(b)}, bp));
        }
      break;
    }
    case Kernel::affine:
      for (int64_t n : kSizes) {
        auto v = random_vec(size_t(n), 11);
        std::vector<double> e(static_cast<size_t>(n));
        for (size_t j = 0; j < e.size(); ++j) e[j] = 1.5 * double(v[j]) - 0.5;
        cs.push_back(make(sz({n}), {outf(e), f32(v)},
                          sy::AffineParams{.n = n, .scale = 1.5f, .shift = -0.5f}));
      }
      break;
    case Kernel::unary:
    case Kernel::unary_backward:
      for (int op = 0; op < sy::kNumUnary; ++op)
        for (int64_t n : {int64_t(3), int64_t(17), int64_t(1000)}) {
          auto x = unary_input(op, n, uint32_t(op * 7 + 1));
          std::vector<double> e(static_cast<size_t>(n));
          if (k == Kernel::unary) {
            for (size_t j = 0; j < e.size(); ++j) e[j] = unary_ref(op, x[j]);
            cs.push_back(make(std::string(unary_name(op)) + " " + sz({n}), {outf(e), f32(x)},
                              sy::UnaryParams{.op = sy::Unary(op), .n = n}));
          } else {
            std::vector<float> y(static_cast<size_t>(n));
            for (size_t j = 0; j < y.size(); ++j) y[j] = float(unary_ref(op, x[j]));
            auto dy = random_vec(size_t(n), 13);
            for (size_t j = 0; j < e.size(); ++j) e[j] = dy[j] * unary_grad_ref(op, x[j], y[j]);
            Case c = make(std::string(unary_name(op)) + " " + sz({n}),
                          {outf(e), f32(dy), f32(x), f32(y)},
                          sy::UnaryBackwardParams{.op = sy::Unary(op), .n = n});
            c.bound = 1e-9;
            cs.push_back(c);
          }
        }
      break;
    case Kernel::reduce_sum:
      for (auto [o, l, in] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1000, 1},
                                                                                {17, 255, 1},
                                                                                {3, 17, 255},
                                                                                {255, 3, 17},
                                                                                {1, 1000, 3},
                                                                                {1000, 1, 1},
                                                                                {2, 4096, 1},
                                                                                {300, 64, 1},
                                                                                {7, 65, 1},
                                                                                {1, 3000, 40},
                                                                                {2, 1500, 33},
                                                                                {1, 40000, 1},
                                                                                {3, 20000, 1}}) {
        auto v = random_vec(size_t(o * l * in), 17);
        std::vector<double> e(static_cast<size_t>(o * in), 0.0);
        for (int64_t a = 0; a < o; ++a)
          for (int64_t b = 0; b < l; ++b)
            for (int64_t c = 0; c < in; ++c)
              e[size_t(a * in + c)] += 0.5 * v[size_t((a * l + b) * in + c)];
        cs.push_back(make(sz({o, l, in}), {outf(e), f32(v)},
                          sy::ReduceSumParams{.outer = o, .len = l, .inner = in, .scale = 0.5f}));
      }
      break;
    case Kernel::expand:
      for (auto [o, l, in] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
               {3, 17, 5}, {1, 1000, 1}, {17, 1, 255}, {1, 3, 1000}}) {
        auto v = random_vec(size_t(o * in), 19);
        std::vector<double> e(static_cast<size_t>(o * l * in));
        for (int64_t a = 0; a < o; ++a)
          for (int64_t b = 0; b < l; ++b)
            for (int64_t c = 0; c < in; ++c)
              e[size_t((a * l + b) * in + c)] = 2.0 * v[size_t(a * in + c)];
        cs.push_back(make(sz({o, l, in}), {outf(e), f32(v)},
                          sy::ExpandParams{.outer = o, .len = l, .inner = in, .scale = 2.f}));
      }
      break;
    case Kernel::softmax:
    case Kernel::softmax_backward:
    case Kernel::cross_entropy:
    case Kernel::cross_entropy_backward:
    case Kernel::argmax:
      for (auto [R, C] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 1},
               {3, 17},
               {17, 255},
               {255, 3},
               {2, 1000},
               {1000, 10},
               {5, 64},
               {4, 65},
               {3, 2000},     // CUDA's block per row, float4s; a row within 8 KiB
               {2, 1027}}) {  // CUDA's block per row, floats
        auto x = random_vec(size_t(R * C), uint32_t(R + C), -4.f, 4.f);
        std::vector<int32_t> lab(static_cast<size_t>(R));
        for (int64_t r = 0; r < R; ++r) lab[size_t(r)] = int32_t((r * 7) % C);
        // Row-wise log-sum-exp and softmax, in double.
        std::vector<double> lse(static_cast<size_t>(R)), sm(static_cast<size_t>(R * C));
        for (int64_t r = 0; r < R; ++r) {
          double m = -INFINITY, s = 0;
          for (int64_t c = 0; c < C; ++c) m = std::max(m, double(x[size_t(r * C + c)]));
          for (int64_t c = 0; c < C; ++c) s += std::exp(x[size_t(r * C + c)] - m);
          lse[size_t(r)] = m + std::log(s);
          for (int64_t c = 0; c < C; ++c)
            sm[size_t(r * C + c)] = std::exp(x[size_t(r * C + c)] - lse[size_t(r)]);
        }
        std::string name = sz({R, C});
        if (k == Kernel::softmax) {
          for (int op : {0, 1}) {
            std::vector<double> e(static_cast<size_t>(R * C));
            for (size_t j = 0; j < e.size(); ++j) e[j] = op ? x[j] - lse[j / size_t(C)] : sm[j];
            cs.push_back(make((op ? "log " : "") + name, {outf(e), f32(x)},
                              sy::SoftmaxParams{.rows = R, .cols = C, .log = op == 1}));
          }
        } else if (k == Kernel::softmax_backward) {
          for (int op : {0, 1}) {
            std::vector<float> y(static_cast<size_t>(R * C));
            for (size_t j = 0; j < y.size(); ++j)
              y[j] = float(op ? x[j] - lse[j / size_t(C)] : sm[j]);
            auto dy = random_vec(size_t(R * C), 23);
            std::vector<double> e(static_cast<size_t>(R * C));
            for (int64_t r = 0; r < R; ++r) {
              double s = 0;
              for (int64_t c = 0; c < C; ++c)
                s += op ? dy[size_t(r * C + c)]
                        : double(dy[size_t(r * C + c)]) * y[size_t(r * C + c)];
              for (int64_t c = 0; c < C; ++c) {
                size_t j = size_t(r * C + c);
                e[j] = op ? dy[j] - std::exp(double(y[j])) * s : y[j] * (dy[j] - s);
              }
            }
            Case c = make((op ? "log " : "") + name, {outf(e), f32(dy), f32(y)},
                          sy::SoftmaxBackwardParams{.rows = R, .cols = C, .log = op == 1});
            c.bound = 1e-9;
            cs.push_back(c);
          }
        } else if (k == Kernel::cross_entropy) {
          double loss = 0;
          for (int64_t r = 0; r < R; ++r)
            loss += lse[size_t(r)] - x[size_t(r * C + lab[size_t(r)])];
          cs.push_back(make(name, {outf({loss / double(R)}), f32(x), i32(lab)},
                            sy::CrossEntropyParams{.rows = R, .cols = C}));
        } else if (k == Kernel::cross_entropy_backward) {
          std::vector<double> e(static_cast<size_t>(R * C));
          double scale = 0.7 / double(R);
          for (int64_t r = 0; r < R; ++r)
            for (int64_t c = 0; c < C; ++c)
              e[size_t(r * C + c)] = (sm[size_t(r * C + c)] - (c == lab[size_t(r)])) * scale;
          cs.push_back(make(name, {outf(e), f32(x), i32(lab), f32({0.7f})},
                            sy::CrossEntropyBackwardParams{.rows = R, .cols = C}));
        } else {
          std::vector<double> e(static_cast<size_t>(R));
          for (int64_t r = 0; r < R; ++r)
            e[size_t(r)] = double(std::max_element(x.begin() + r * C, x.begin() + (r + 1) * C) -
                                  (x.begin() + r * C));
          cs.push_back(
              make(name, {out(sy::DType::i32, e), f32(x)}, sy::ArgmaxParams{.rows = R, .cols = C}));
          // Whole numbers in [-4, 4]: every row has ties, and the first max wins.
          std::vector<float> q(x.size());
          for (size_t j = 0; j < q.size(); ++j) q[j] = std::round(x[j]);
          for (int64_t r = 0; r < R; ++r)
            e[size_t(r)] = double(std::max_element(q.begin() + r * C, q.begin() + (r + 1) * C) -
                                  (q.begin() + r * C));
          cs.push_back(make(name + " ties", {out(sy::DType::i32, e), f32(q)},
                            sy::ArgmaxParams{.rows = R, .cols = C}));
          // NaNs, as std::max_element takes them: a row starting with NaN
          // gives 0; a NaN later is never chosen.
          if (C >= 3) {
            for (int64_t r = 0; r < R; ++r) {
              q[size_t(r * C + (r % 2 ? C - 1 : 0))] = NAN;
              q[size_t(r * C + C / 2)] = NAN;
              if (C > 48) {  // the first element of a CUDA lane's share; its maximum after it
                q[size_t(r * C + 16)] = NAN;
                q[size_t(r * C + 48)] = 100.f;
              }
              e[size_t(r)] = double(std::max_element(q.begin() + r * C, q.begin() + (r + 1) * C) -
                                    (q.begin() + r * C));
            }
            cs.push_back(make(name + " NaN", {out(sy::DType::i32, e), f32(q)},
                              sy::ArgmaxParams{.rows = R, .cols = C}));
          }
        }
      }
      break;
    case Kernel::sgd_update:
    case Kernel::sgd_momentum_update:
    case Kernel::adam_update:
    case Kernel::adam_multi:
    case Kernel::sgd_multi:
      return optimizer_cases(k);
    case Kernel::custom:  // a user's kernel: tests/test_custom.cpp
      break;
  }
  return cs;
}

}  // namespace conformance
