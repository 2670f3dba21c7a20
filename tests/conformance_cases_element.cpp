// SPDX-License-Identifier: MIT
// Conformance cases of the element kernels: fill, arange, cast and
// transpose, in every dtype (bf16 and f16 exactly, against round_half).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "conformance_util.h"

using sy::Kernel;

namespace conformance {
namespace {

const std::vector<int64_t> kSizes = {1, 3, 17, 255, 1000};

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

std::vector<Case> element_cases(Kernel k) {
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
    default:
      break;
  }
  return cs;
}

// A and B rounded to 16 bits, summed in f32: the reference sums the rounded
// values in double (products of two 16-bit values are exact in f32, so the
// bound is f32's). Transposes, a bias and ReLU, K past llvmpipe's loop
// budget (split into parts on Vulkan), and batched products whose A starts
// mid-word (an odd stride) with B shared. The large shapes in one transpose
// each: the conformance suite runs under every Vulkan variant, and lavapipe
// takes seconds per large case.
std::vector<Case> half_gemm_cases() {
  std::vector<Case> cs;
  auto rounded = [](const auto& v, sy::DType t) {  // floats, or exact doubles
    std::vector<double> r(v.size());
    for (size_t j = 0; j < v.size(); ++j) r[j] = round_half(v[j], t);
    return r;
  };
  // The same product written in t (GemmParams::c_dtype): the f32 sums
  // (bias and activation included) rounded once, so within 1 ulp of the
  // exact result rounded.
  auto half_out = [&](Case c, const std::vector<double>& e, sy::DType t) {
    auto p = sy::params<Kernel::gemm>(c.ins.params);
    p.c_dtype = t;
    c.ins.params = p;
    c.args[0] = out(t, rounded(e, t));
    c.name += sy::detail::cat(" -> ", sy::dtype_name(t));
    c.half_ulps = 1;
    return c;
  };
  for (sy::DType t : kHalves) {
    for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{
             {3, 17, 5}, {63, 65, 17}, {129, 127, 130}, {7, 24, 20000}})
      for (int tr = 0; tr < 4; ++tr) {
        if (M * N * K > 100000 && tr != (t == sy::DType::bf16 ? 3 : 1)) continue;
        const bool ta = tr & 1, tb = tr & 2, bias = tr == 1, relu = tr == 3;
        const auto A = rounded(random_vec(size_t(M * K), uint32_t(M + K + 1)), t);
        const auto B = rounded(random_vec(size_t(K * N), uint32_t(N + K + 2)), t);
        const auto bv = random_vec(size_t(N), 5);
        std::vector<double> e(size_t(M * N));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double s = 0;
            for (int64_t q = 0; q < K; ++q)
              s += (ta ? A[size_t(q * M + m)] : A[size_t(m * K + q)]) *
                   (tb ? B[size_t(n * K + q)] : B[size_t(q * N + n)]);
            s += bias ? bv[size_t(n)] : 0.0;
            e[size_t(m * N + n)] = relu ? std::max(s, 0.0) : s;
          }
        std::vector<HostArg> args = {outf(e), half_input(A, t), half_input(B, t)};
        if (bias) args.push_back(f32(bv));
        cs.push_back(
            make(sy::detail::cat(sy::dtype_name(t), " ", sz({M, N, K}), ta ? " At" : "",
                                 tb ? " Bt" : "", bias ? " +bias" : "", relu ? " relu" : ""),
                 args,
                 sy::GemmParams{.m = M,
                                .n = N,
                                .k = K,
                                .trans_a = ta,
                                .trans_b = tb,
                                .has_bias = bias,
                                .act = relu ? sy::Unary::relu : sy::Unary::none,
                                .batch = 1,
                                .ab_dtype = t,
                                .alpha = 1.f}));
        if (M * N * K > 100000) continue;
        cs.push_back(half_out(cs.back(), e, t));
        if (bias) continue;     // (an f32 bias cannot start mid-word)
        Case view = cs.back();  // every operand, C included, starting mid-word
        view.offset = 2;
        view.name += " view+2";
        cs.push_back(view);
      }
    const int64_t S = 3, M = 5, N = 6, K = 7, sa = M * K + 2;  // odd: products start mid-word
    const auto A = rounded(random_vec(size_t(S * sa), 21), t);
    const auto B = rounded(random_vec(size_t(K * N), 22), t);
    std::vector<double> e(size_t(S * M * N));
    for (int64_t b = 0; b < S; ++b)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t q = 0; q < K; ++q) s += A[size_t(b * sa + m * K + q)] * B[size_t(q * N + n)];
          e[size_t((b * M + m) * N + n)] = s;
        }
    cs.push_back(make(sy::detail::cat(sy::dtype_name(t), " batched, odd stride, B shared"),
                      {outf(e), half_input(A, t), half_input(B, t)},
                      sy::GemmParams{.m = M,
                                     .n = N,
                                     .k = K,
                                     .batch = S,
                                     .stride_a = sa,
                                     .stride_b = 0,
                                     .stride_c = M * N,
                                     .ab_dtype = t,
                                     .alpha = 1.f}));
    cs.push_back(half_out(cs.back(), e, t));
  }
  return cs;
}

}  // namespace conformance
