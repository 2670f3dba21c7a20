// SPDX-License-Identifier: MIT
// bf16 and f16 tensors through the public API, on every device: casts of
// every 16-bit value, rounding, creation, printing, ops (computed in f32,
// rounded once), type promotion, gradients through casts, and the errors.
// Tolerances: an op's bf16 (f16) result is its f32 value rounded once, so
// it is within half an ulp of the double reference: a normalized squared
// error below 2^-16 for bf16 (8 significant bits) and 2^-22 for f16 (11),
// plus f32's own error, far below either.
#include <cmath>
#include <cstring>
#include <sstream>

#include "conformance_util.h"
#include "helpers.h"

using conformance::half_value;
using conformance::round_half;
using sy::DType;
using sy::Tensor;

namespace {

constexpr DType kHalves[] = {DType::bf16, DType::f16};

double tolerance(DType t) { return t == DType::bf16 ? std::ldexp(1, -16) : std::ldexp(1, -22); }

std::vector<uint16_t> bits_of(const Tensor& t) { return t.to_vector<uint16_t>(); }

// v rounded to t, as doubles.
std::vector<double> rounded(const std::vector<float>& v, DType t) {
  std::vector<double> r(v.size());
  for (size_t j = 0; j < v.size(); ++j) r[j] = round_half(v[j], t);
  return r;
}

}  // namespace

class Half : public OnDevice {};

// All 65,536 words of each format, widened to f32 and narrowed back on the
// device: every value exact both ways (NaNs stay NaN).
TEST_P(Half, EveryValueWidensExactlyAndNarrowsBack) {
  for (DType t : kHalves) {
    std::vector<uint16_t> all(65536);
    for (size_t j = 0; j < all.size(); ++j) all[j] = uint16_t(j);
    Tensor h = sy::from_data(all.data(), t, {65536}, D());
    EXPECT_EQ(h.dtype(), t);
    const std::vector<float> wide = h.to(DType::f32).to_vector<float>();
    const std::vector<uint16_t> back = bits_of(h.to(DType::f32).to(t));
    const std::vector<float> direct = h.to_vector<float>();  // widened on the host
    int bad = 0;
    for (size_t j = 0; j < all.size() && bad < 5; ++j) {
      const double want = half_value(uint16_t(j), t);
      const bool nan = std::isnan(want);
      const bool ok =
          nan ? std::isnan(wide[j]) && std::isnan(direct[j]) &&
                    (t == DType::bf16 ? (back[j] & 0x7f80) == 0x7f80 && (back[j] & 0x7f)
                                      : (back[j] & 0x7c00) == 0x7c00 && (back[j] & 0x3ff))
              : double(wide[j]) == want && double(direct[j]) == want && back[j] == j &&
                    std::signbit(wide[j]) == std::signbit(want);
      if (!ok) {
        ++bad;
        ADD_FAILURE() << sy::dtype_name(t) << " word " << j << ": widened " << wide[j] << " (host "
                      << direct[j] << "), back " << back[j] << ", expected " << want;
      }
    }
  }
}

// f32 -> 16 bits rounds to nearest even on the device and on the host
// (from_vector with a 16-bit dtype) alike.
TEST_P(Half, NarrowingRoundsToNearestEvenOnTheDeviceAndTheHost) {
  std::vector<float> v = {
      1.00390625f, 1.01171875f, 1.00048828125f, 1.00146484375f,          65519.f,
      65520.f,     -65520.f,    3e-6f,          2.98023223876953125e-8f, 2.9802326e-8f,
      6.1e-5f,     1e30f,       -0.f,           3.4028235e38f,           1e-40f,
      -2.5f,       0.1f};
  const auto r = random_vec(1000, 11, -70000.f, 70000.f);
  v.insert(v.end(), r.begin(), r.end());
  const int64_t n = int64_t(v.size());
  for (DType t : kHalves) {
    const auto dev = bits_of(sy::from_vector(v, {n}, D()).to(t));
    const auto host = bits_of(sy::from_vector(v, {n}, sy::Options(D()).dtype(t)));
    for (size_t j = 0; j < v.size(); ++j) {
      const double want = round_half(v[j], t);
      ASSERT_EQ(half_value(dev[j], t), want) << sy::dtype_name(t) << " of " << v[j];
      ASSERT_EQ(std::signbit(half_value(dev[j], t)), std::signbit(want)) << v[j];
      ASSERT_EQ(dev[j], host[j]) << sy::dtype_name(t) << " of " << v[j];
    }
  }
}

TEST_P(Half, FactoriesMakeSixteenBitTensors) {
  for (DType t : kHalves) {
    const sy::Options o = sy::Options(D()).dtype(t);
    EXPECT_EQ(sy::zeros({5}, o).to_vector<float>(), std::vector<float>(5, 0.f));
    EXPECT_EQ(sy::full({3}, 0.1f, o).to_vector<float>(),
              std::vector<float>(3, float(round_half(0.1f, t))));
    const auto a = sy::arange(7, o).to_vector<float>();
    for (size_t j = 0; j < a.size(); ++j) EXPECT_EQ(a[j], float(j));
    // Random draws are the f32 draws rounded (same seed, same stream).
    sy::manual_seed(5);
    const auto f = sy::randn({301}, D()).to_vector<float>();
    sy::manual_seed(5);
    const Tensor h = sy::randn({301}, o);
    EXPECT_EQ(h.dtype(), t);
    const auto hv = h.to_vector<float>();
    for (size_t j = 0; j < f.size(); ++j) ASSERT_EQ(double(hv[j]), round_half(f[j], t));
    EXPECT_EQ(sy::ones({1}, o).item(), 1.f);
  }
}

TEST_P(Half, PrintsItsDtypeAndExactValues) {
  std::ostringstream s;
  s << sy::from_vector(std::vector<float>{1.5f, -0.25f, 3.f}, {3},
                       sy::Options(D()).dtype(DType::bf16));
  EXPECT_NE(s.str().find("dtype=bf16"), std::string::npos) << s.str();
  EXPECT_NE(s.str().find("values=[1.5, -0.25, 3]"), std::string::npos) << s.str();
}

// Ops compute in f32 and round their result once: within half an ulp of the
// double reference of the rounded inputs.
TEST_P(Half, OpsComputeInF32AndRoundOnce) {
  const int64_t M = 19, K = 67, N = 33;
  const auto a = random_vec(size_t(M * K), 1), b = random_vec(size_t(K * N), 2);
  for (DType t : kHalves) {
    const sy::Options o = sy::Options(D()).dtype(t);
    const Tensor A = sy::from_vector(a, {M, K}, o), B = sy::from_vector(b, {K, N}, o);
    const auto ar = rounded(a, t), br = rounded(b, t);
    // matmul
    const Tensor C = sy::matmul(A, B);
    EXPECT_EQ(C.dtype(), t);
    std::vector<double> c(size_t(M * N), 0.0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k)
          c[size_t(i * N + j)] += ar[size_t(i * K + k)] * br[size_t(k * N + j)];
    EXPECT_LT(nse(C.to_vector<float>(), c), tolerance(t)) << sy::dtype_name(t);
    // elementwise with broadcasting, then a reduction and a softmax
    const Tensor row = sy::from_vector(std::vector<float>(b.begin(), b.begin() + K), {K}, o);
    const Tensor s = sy::add(sy::mul(A, row), 0.5f);
    EXPECT_EQ(s.dtype(), t);
    std::vector<double> se(size_t(M * K)), sums(size_t(M), 0.0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) {
        se[size_t(i * K + k)] = round_half(float(ar[size_t(i * K + k)] * br[size_t(k)]), t);
        se[size_t(i * K + k)] = round_half(float(se[size_t(i * K + k)] + 0.5), t);
      }
    EXPECT_LT(nse(s.to_vector<float>(), se), tolerance(t));
    const Tensor sm = sy::softmax(A, 1);
    EXPECT_EQ(sm.dtype(), t);
    const Tensor rs = sy::sum(sm, 1);
    EXPECT_EQ(rs.dtype(), t);
    EXPECT_LT(nse(rs.to_vector<float>(), std::vector<double>(size_t(M), 1.0)), tolerance(t));
    const Tensor r = sy::relu(A);
    const auto rv = r.to_vector<float>();
    for (size_t j = 0; j < ar.size(); ++j) ASSERT_EQ(double(rv[j]), std::max(ar[j], 0.0));
    EXPECT_EQ(sy::argmax(A, 1).dtype(), DType::i32);
    EXPECT_EQ(sy::gt(A, 0.f).dtype(), DType::u8);
    EXPECT_EQ(A.t().dtype(), t);
    EXPECT_EQ(A.t().to_vector<float>(), sy::transpose(A.to(DType::f32)).to_vector<float>());
  }
}

// PyTorch's promotion: one 16-bit dtype stays; mixed with f32 or with the
// other 16-bit dtype, f32.
TEST_P(Half, MixedDtypesPromoteAsPyTorch) {
  const Tensor x = sy::ones({4}, D());
  const Tensor b = x.to(DType::bf16), h = x.to(DType::f16);
  EXPECT_EQ((b + b).dtype(), DType::bf16);
  EXPECT_EQ((h * h).dtype(), DType::f16);
  EXPECT_EQ((b + x).dtype(), DType::f32);
  EXPECT_EQ((b + h).dtype(), DType::f32);
  EXPECT_EQ(sy::sum(b + h).item(), 8.f);
}

// Casts between floating dtypes pass gradients back in the input's dtype.
TEST_P(Half, GradientsFlowThroughCastsAndSixteenBitOps) {
  const auto wv = random_vec(12, 3), xv = random_vec(8, 4);
  Tensor w = sy::from_vector(wv, {4, 3}, sy::Options(D()).requires_grad());
  Tensor x = sy::from_vector(xv, {2, 4}, D());
  for (DType t : kHalves) {
    w.zero_grad();
    Tensor y = sy::matmul(x.to(t), w.to(t));  // (2, 3) in t
    EXPECT_EQ(y.dtype(), t);
    sy::sum(y.to(DType::f32)).backward();
    ASSERT_TRUE(w.grad().defined());
    EXPECT_EQ(w.grad().dtype(), DType::f32);
    // dL/dw[k][j] = sum_i x[i][k], with x rounded to t
    const auto xr = rounded(xv, t);
    std::vector<double> want(12);
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) want[size_t(k * 3 + j)] = xr[size_t(k)] + xr[size_t(4 + k)];
    EXPECT_LT(nse(w.grad().to_vector<float>(), want), tolerance(t)) << sy::dtype_name(t);
    // A 16-bit leaf gets a 16-bit gradient.
    Tensor h = sy::from_vector(xv, {8}, sy::Options(D()).dtype(t).requires_grad());
    sy::sum(sy::mul(h, h)).backward();
    EXPECT_EQ(h.grad().dtype(), t);
    const auto g = h.grad().to_vector<float>();
    for (size_t j = 0; j < g.size(); ++j) EXPECT_EQ(double(g[j]), round_half(2 * xr[j], t));
  }
}

TEST_P(Half, ErrorsNameTheDtypes) {
  Tensor p = sy::zeros({3}, sy::Options(D()).dtype(DType::bf16).requires_grad());
  expect_error([&] { sy::optim::SGD({p}, 0.1f); },
               {"[optimizer]", "expected f32 parameters", "dtype bf16", "(3)"});
  expect_error([&] { sy::zeros({3}, sy::Options(D()).dtype(DType::i32)).requires_grad_(); },
               {"[requires_grad_]", "floating-point tensors (f32, bf16, f16)", "i32"});
  expect_error([&] { sy::zeros({2}, sy::Options(D()).dtype(DType::bf16)).to_vector<int32_t>(); },
               {"[to_vector]", "expected a tensor of dtype i32", "found dtype bf16"});
}

INSTANTIATE_TEST_SUITE_P(Devices, Half, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& i) { return device_param_name(i.param); });
