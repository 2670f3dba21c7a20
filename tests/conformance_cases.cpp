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
    case sy::Unary::none:
      return 1;
  }
  return 1;
}

// Inputs in the op's domain (log and sqrt need positive values).
std::vector<float> unary_input(int op, int64_t n, uint32_t seed) {
  bool pos = op == int(sy::Unary::log) || op == int(sy::Unary::sqrt);
  return random_vec(size_t(n), seed, pos ? 0.1f : -3.f, 3.f);
}

const sy::DType kHalves[] = {sy::DType::bf16, sy::DType::f16};

// f32 values that test a conversion to 16 bits: ties of both formats
// (rounding to the even neighbour, down and up), f16's overflow threshold
// (65519 rounds to 65504, 65520 to infinity), f16 subnormals and the tie
// at half the smallest one, f32's largest finite (infinity in bf16), an f32
// subnormal (a bf16 subnormal), signed zero, infinities and NaN; then
// random values over f16's range.
std::vector<float> conversion_values(int64_t n, bool finite) {
  const float specials[] = {1.00390625f,
                            1.01171875f,
                            1.00048828125f,
                            1.00146484375f,
                            65519.f,
                            65520.f,
                            -65520.f,
                            3e-6f,
                            2.98023223876953125e-8f,
                            2.9802326e-8f,
                            6.1e-5f,
                            1e30f,
                            -0.f,
                            3.4028235e38f,
                            1e-40f,
                            -2.5f,
                            300.5f,
                            INFINITY,
                            -INFINITY,
                            NAN};
  // finite: values finite in both 16-bit formats too (|x| < 65504).
  auto v = finite ? random_vec(size_t(n), 9, -65504.f, 65504.f)
                  : random_vec(size_t(n), 9, -70000.f, 70000.f);
  size_t k = 0;
  for (float x : specials)
    if (k < v.size() && (!finite || std::fabs(x) <= 65504.f)) v[k++] = x;
  return v;
}

}  // namespace

// ---- cases per kernel ---------------------------------------------------------------
std::vector<Case> cases_for(Kernel k) {
  std::vector<Case> cs;
  switch (k) {
    case Kernel::fill:
      for (int64_t n : kSizes) {
        cs.push_back(make("f32 " + sz({n}), {outf(std::vector<double>(size_t(n), 2.5))},
                          sy::FillParams{.n = n, .dtype = sy::DType::f32, .value = 2.5f}));
        cs.push_back(make("i32 " + sz({n}),
                          {out(sy::DType::i32, std::vector<double>(size_t(n), -7))},
                          sy::FillParams{.n = n, .dtype = sy::DType::i32, .value = -7.f}));
        cs.push_back(make("u8 " + sz({n}), {out(sy::DType::u8, std::vector<double>(size_t(n), 7))},
                          sy::FillParams{.n = n, .dtype = sy::DType::u8, .value = 7.f}));
        cs.push_back(make("i64 " + sz({n}),
                          {out(sy::DType::i64, std::vector<double>(size_t(n), -7))},
                          sy::FillParams{.n = n, .dtype = sy::DType::i64, .value = -7.f}));
        // Beyond i32: 2^40 + 2^20 and -3 * 2^33 are exact in f32.
        cs.push_back(
            make("i64 large " + sz({n}),
                 {out(sy::DType::i64, std::vector<double>(size_t(n), 1099512676352.0))},
                 sy::FillParams{.n = n, .dtype = sy::DType::i64, .value = 1099512676352.f}));
        cs.push_back(
            make("i64 large negative " + sz({n}),
                 {out(sy::DType::i64, std::vector<double>(size_t(n), -25769803776.0))},
                 sy::FillParams{.n = n, .dtype = sy::DType::i64, .value = -25769803776.f}));
        // 16-bit: rounded once; f16 overflows to infinity; and a tensor
        // starting mid-word (its first and last words shared with others).
        for (sy::DType t : kHalves)
          for (float value : {2.7f, -70000.f})
            for (uint64_t offset : {0, 2}) {
              Case c = make(sy::detail::cat(sy::dtype_name(t), " ", value, " ", sz({n}),
                                            offset ? " at a 2-byte offset" : ""),
                            {out(t, std::vector<double>(size_t(n), round_half(value, t)))},
                            sy::FillParams{.n = n, .dtype = t, .value = value});
              c.offset = offset;
              cs.push_back(c);
            }
      }
      break;
    case Kernel::arange:
      for (int64_t n : kSizes) {
        std::vector<double> ef(static_cast<size_t>(n)), ei(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j)
          ef[size_t(j)] = -1.5 + 0.25 * double(j), ei[size_t(j)] = 3 + 2 * j;
        cs.push_back(
            make("f32 " + sz({n}), {outf(ef)},
                 sy::ArangeParams{.n = n, .dtype = sy::DType::f32, .start = -1.5f, .step = 0.25f}));
        cs.push_back(
            make("i32 " + sz({n}), {out(sy::DType::i32, ei)},
                 sy::ArangeParams{.n = n, .dtype = sy::DType::i32, .start = 3.f, .step = 2.f}));
        std::vector<double> el(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) el[size_t(j)] = -5 + 3 * j;
        cs.push_back(
            make("i64 " + sz({n}), {out(sy::DType::i64, el)},
                 sy::ArangeParams{.n = n, .dtype = sy::DType::i64, .start = -5.f, .step = 3.f}));
        for (sy::DType t : kHalves)
          for (uint64_t offset : {0, 2}) {
            std::vector<double> eh(static_cast<size_t>(n));
            for (int64_t j = 0; j < n; ++j)
              eh[size_t(j)] = round_half(double(-1.5f + float(j) * 0.3f), t);
            Case c = make(sy::detail::cat(sy::dtype_name(t), " ", sz({n}),
                                          offset ? " at a 2-byte offset" : ""),
                          {out(t, eh)},
                          sy::ArangeParams{.n = n, .dtype = t, .start = -1.5f, .step = 0.3f});
            c.offset = offset;
            cs.push_back(c);
          }
      }
      break;
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
    case Kernel::cast:
      for (int64_t n : kSizes) {
        auto v = random_vec(size_t(n), 5, -300.f, 300.f);
        std::vector<double> trunc(static_cast<size_t>(n)), asf(static_cast<size_t>(n));
        std::vector<int32_t> iv(static_cast<size_t>(n));
        std::vector<uint8_t> bv(static_cast<size_t>(n));
        for (size_t j = 0; j < size_t(n); ++j) {
          trunc[j] = double(int32_t(v[j]));
          iv[j] = int32_t(j * 37) - 500;
          asf[j] = double(iv[j]);
          bv[j] = uint8_t(j * 13);
        }
        using sy::DType;
        auto cast = [n](DType from, DType to) {
          return sy::CastParams{.n = n, .from = from, .to = to};
        };
        cs.push_back(make("f32->i32 " + sz({n}), {out(DType::i32, trunc), f32(v)},
                          cast(DType::f32, DType::i32)));
        cs.push_back(
            make("i32->f32 " + sz({n}), {outf(asf), i32(iv)}, cast(DType::i32, DType::f32)));
        std::vector<double> b2f(bv.begin(), bv.end());
        cs.push_back(make("u8->f32 " + sz({n}), {outf(b2f), u8(bv)}, cast(DType::u8, DType::f32)));
        std::vector<float> small(static_cast<size_t>(n));
        for (size_t j = 0; j < size_t(n); ++j) small[j] = float(bv[j]) + 0.25f;
        cs.push_back(make("f32->u8 " + sz({n}), {out(DType::u8, b2f), f32(small)},
                          cast(DType::f32, DType::u8)));
        // i64: values within and beyond i32 (exact in f32 where compared as
        // f32), i64 -> i32 saturating, i64 -> u8 keeping the low byte.
        std::vector<int64_t> lv(static_cast<size_t>(n));
        std::vector<double> l2f(lv.size()), l2i(lv.size()), l2b(lv.size());
        std::vector<double> i2l(lv.size()), b2l(lv.size()), f2l(lv.size());
        std::vector<float> big(lv.size());
        for (size_t j = 0; j < lv.size(); ++j) {
          const int64_t huge = (int64_t(1) << 40) * (j % 2 ? -1 : 1) + int64_t(j % 7) * 4096;
          lv[j] = j % 3 == 0 ? huge : int64_t(j * 37) - 500;
          l2f[j] = double(float(lv[j]));
          l2i[j] = double(std::clamp<int64_t>(lv[j], INT32_MIN, INT32_MAX));
          l2b[j] = double(uint8_t(lv[j]));
          i2l[j] = double(iv[j]);
          b2l[j] = double(bv[j]);
          big[j] = j % 4 == 0 ? float(huge) : j % 4 == 1 ? 3e19f : j % 4 == 2 ? -3e19f : v[j];
          f2l[j] = j % 4 == 0   ? double(float(huge))
                   : j % 4 == 1 ? double(INT64_MAX)
                   : j % 4 == 2 ? double(INT64_MIN)
                                : double(int64_t(v[j]));
        }
        auto add = [&](const char* name, HostArg o, HostArg in, DType from, DType to) {
          cs.push_back(make(std::string(name) + " " + sz({n}), {std::move(o), std::move(in)},
                            cast(from, to)));
        };
        add("i64->f32", outf(l2f), i64(lv), DType::i64, DType::f32);
        add("i64->i32", out(DType::i32, l2i), i64(lv), DType::i64, DType::i32);
        add("i64->u8", out(DType::u8, l2b), i64(lv), DType::i64, DType::u8);
        add("i32->i64", out(DType::i64, i2l), i32(iv), DType::i32, DType::i64);
        add("u8->i64", out(DType::i64, b2l), u8(bv), DType::u8, DType::i64);
        add("f32->i64", out(DType::i64, f2l), f32(big), DType::f32, DType::i64);
        // i64 -> f32 rounded once, compared exactly: small negatives, and
        // values whose two halves would round twice.
        std::vector<int64_t> hard(static_cast<size_t>(n));
        std::vector<double> hard_f(hard.size());
        const int64_t picks[] = {-1,
                                 -100,
                                 -463,
                                 (int64_t(1) << 32) + (1 << 24) + 257,
                                 -(int64_t(1) << 32) - (1 << 24) - 257,
                                 int64_t(1) << 31,
                                 -(int64_t(1) << 31) - 1,
                                 (int64_t(1) << 56) + 12345,
                                 -(int64_t(1) << 60) - 123,
                                 INT64_MIN,
                                 INT64_MAX};
        for (size_t j = 0; j < hard.size(); ++j) {
          hard[j] = picks[j % std::size(picks)] - int64_t(j / std::size(picks));
          hard_f[j] = double(float(hard[j]));
        }
        add("i64->f32 exact", outf(hard_f), i64(hard), DType::i64, DType::f32);
        cs.back().bound = 0;
        // bf16 and f16, both ways, against round_half (exact).
        const auto all = conversion_values(n, false), fin = conversion_values(n, true);
        const std::vector<double> all_d(all.begin(), all.end()), fin_d(fin.begin(), fin.end());
        auto each = [&](const std::vector<double>& x, auto f) {
          std::vector<double> e(x.size());
          for (size_t j = 0; j < x.size(); ++j) e[j] = f(x[j]);
          return e;
        };
        const char* names[] = {"f32", "i32", "u8", "i64", "bf16", "f16"};
        auto nm = [&](DType a, DType b) {
          return std::string(names[int(a)]) + "->" + names[int(b)];
        };
        for (DType t : kHalves) {
          const DType other = t == DType::bf16 ? DType::f16 : DType::bf16;
          auto r = [t](double x) { return round_half(x, t); };
          add(nm(DType::f32, t).c_str(), out(t, each(all_d, r)), f32(all), DType::f32, t);
          add(nm(t, DType::f32).c_str(), outf(each(fin_d, r)), half_input(fin_d, t), t, DType::f32);
          cs.back().bound = 0;
          auto via = [&](double x) { return round_half(round_half(x, other), t); };
          add(nm(other, t).c_str(), out(t, each(all_d, via)), half_input(all_d, other), other, t);
          std::vector<double> id(iv.begin(), iv.end()), ld(lv.size()), bd(bv.begin(), bv.end());
          for (size_t j = 0; j < lv.size(); ++j) ld[j] = double(float(lv[j]));
          add(nm(DType::i32, t).c_str(), out(t, each(id, r)), i32(iv), DType::i32, t);
          add(nm(DType::i64, t).c_str(), out(t, each(ld, r)), i64(lv), DType::i64, t);
          add(nm(DType::u8, t).c_str(), out(t, each(bd, r)), u8(bv), DType::u8, t);
          const std::vector<double> vd(v.begin(), v.end());  // within +-300: every int dtype
          auto trunc_of = [&](double x) { return std::trunc(round_half(x, t)); };
          add(nm(t, DType::i32).c_str(), out(DType::i32, each(vd, trunc_of)), half_input(vd, t), t,
              DType::i32);
          add(nm(t, DType::i64).c_str(), out(DType::i64, each(vd, trunc_of)), half_input(vd, t), t,
              DType::i64);
          const std::vector<double> bq = each(bd, [](double x) { return x + 0.25; });
          add(nm(t, DType::u8).c_str(), out(DType::u8, each(bq, trunc_of)), half_input(bq, t), t,
              DType::u8);
          // Mid-word: both tensors start 2 bytes into their buffers.
          add((nm(other, t) + " at a 2-byte offset").c_str(), out(t, each(all_d, via)),
              half_input(all_d, other), other, t);
          cs.back().offset = 2;
        }
      }
      break;
    case Kernel::transpose:
      for (auto [R, C] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 1}, {3, 17}, {17, 255}, {255, 3}, {64, 1000}, {100, 33}, {33, 70}}) {
        auto v = random_vec(size_t(R * C), 7);
        std::vector<double> e(static_cast<size_t>(R * C));
        std::vector<uint8_t> b(static_cast<size_t>(R * C));
        std::vector<double> eb(static_cast<size_t>(R * C));
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c) {
            e[size_t(c * R + r)] = v[size_t(r * C + c)];
            b[size_t(r * C + c)] = uint8_t(r * 31 + c);
            eb[size_t(c * R + r)] = uint8_t(r * 31 + c);
          }
        cs.push_back(make("f32 " + sz({R, C}), {outf(e), f32(v)},
                          sy::TransposeParams{.rows = R, .cols = C, .elem_size = 4}));
        cs.push_back(make("u8 " + sz({R, C}), {out(sy::DType::u8, eb), u8(b)},
                          sy::TransposeParams{.rows = R, .cols = C, .elem_size = 1}));
        std::vector<int64_t> l(static_cast<size_t>(R * C));
        std::vector<double> el(l.size());
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c) {
            const int64_t x = (int64_t(r) << 33) - c;  // both words matter
            l[size_t(r * C + c)] = x;
            el[size_t(c * R + r)] = double(x);
          }
        cs.push_back(make("i64 " + sz({R, C}), {out(sy::DType::i64, el), i64(l)},
                          sy::TransposeParams{.rows = R, .cols = C, .elem_size = 8}));
        std::vector<double> h(v.begin(), v.end()), eh(h.size());
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c)
            eh[size_t(c * R + r)] = round_half(h[size_t(r * C + c)], sy::DType::f16);
        for (uint64_t offset : {0, 2}) {
          Case c = make("f16 " + sz({R, C}) + (offset ? " at a 2-byte offset" : ""),
                        {out(sy::DType::f16, eh), half_input(h, sy::DType::f16)},
                        sy::TransposeParams{.rows = R, .cols = C, .elem_size = 2});
          c.offset = offset;
          cs.push_back(c);
        }
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
