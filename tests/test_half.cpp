// SPDX-License-Identifier: MIT
// bf16 and f16 tensors through the public API, on every device: casts of
// every 16-bit value, rounding, creation, printing, ops (computed in f32,
// rounded once), type promotion, gradients through casts, autocast,
// GradScaler, 16-bit safetensors and model files, and the errors.
// Tolerances: an op's bf16 (f16) result is its f32 value rounded once, so
// it is within half an ulp of the double reference: a normalized squared
// error below 2^-16 for bf16 (8 significant bits) and 2^-22 for f16 (11),
// plus f32's own error, far below either.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "checkpoint.h"
#include "conformance_util.h"
#include "helpers.h"
#include "mlp.h"
#include "switchyard/amp.h"

using conformance::half_value;
using conformance::round_half;
using sy::DType;
using sy::Tensor;

namespace {

constexpr DType kHalves[] = {DType::bf16, DType::f16};

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("sy_half_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

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
  std::vector<float> v = {1.00390625f,    1.01171875f,   1.00048828125f,
                          1.00146484375f, 65519.f,       65520.f,
                          -65520.f,       3e-6f,         2.98023223876953125e-8f,
                          2.9802326e-8f,  6.1e-5f,       1e30f,
                          -0.f,           3.4028235e38f, 1e-40f,
                          -2.5f,          0.1f,          INFINITY,
                          -INFINITY};
  // NaNs: quiet and signalling, both signs, payloads in high and low bits.
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7fa00001u, 0x7f800001u, 0xff812345u}) {
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
  }
  const auto r = random_vec(1000, 11, -70000.f, 70000.f);
  v.insert(v.end(), r.begin(), r.end());
  const int64_t n = int64_t(v.size());
  for (DType t : kHalves) {
    const auto dev = bits_of(sy::from_vector(v, {n}, D()).to(t));
    const auto host = bits_of(sy::from_vector(v, {n}, sy::Options(D()).dtype(t)));
    for (size_t j = 0; j < v.size(); ++j) {
      // The device's bits are the host's (pointwise.h), NaN payloads too.
      ASSERT_EQ(dev[j], host[j]) << sy::dtype_name(t) << " of " << v[j] << " (word " << j << ")";
      if (std::isnan(v[j])) {
        ASSERT_TRUE(std::isnan(half_value(dev[j], t))) << v[j];
        continue;
      }
      const double want = round_half(v[j], t);
      ASSERT_EQ(half_value(dev[j], t), want) << sy::dtype_name(t) << " of " << v[j];
      ASSERT_EQ(std::signbit(half_value(dev[j], t)), std::signbit(want)) << v[j];
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

// A product whose K a device splits into passes adding to C (lavapipe's
// loop budget: K past about 5,000) is still rounded once: the device's gemm
// does not write it in 16 bits (gemm_writes), the op casts an f32 result.
TEST_P(Half, AMatmulWithALongKIsRoundedOnce) {
  // Rows of ones times columns of +v (6,000 times), -v (6,000 times) and
  // w: every partial sum, in any order, is exact in f32 (at most 22
  // significant bits: w a multiple of 2^-9 below 2^15) and the product is
  // exactly w, while a partial sum rounded to bf16 (8 bits) would be off by
  // tens.
  const int64_t M = 2, K = 12001, N = 3;
  const DType t = DType::bf16;
  std::vector<float> a(size_t(M * K), 1.f), b(size_t(K * N));
  std::vector<float> w(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) {
    const float v = 1.0078125f * float(j + 1);  // exact in bf16
    w[size_t(j)] = 0.5f * float(j + 1);
    for (int64_t k = 0; k < K - 1; ++k) b[size_t(k * N + j)] = k < (K - 1) / 2 ? v : -v;
    b[size_t((K - 1) * N + j)] = w[size_t(j)];
  }
  const sy::Options o = sy::Options(D()).dtype(t);
  const Tensor C = sy::matmul(sy::from_vector(a, {M, K}, o), sy::from_vector(b, {K, N}, o));
  EXPECT_EQ(C.dtype(), t);
  const auto got = C.to_vector<float>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      EXPECT_EQ(got[size_t(i * N + j)], w[size_t(j)]) << i << "," << j;
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

// autocast: GEMM-like ops in the low dtype, the f32 list in f32, the rest
// in their inputs' dtype; scopes nest and end.
TEST_P(Half, AutocastRunsEachOpInItsListsDtype) {
  const Tensor x = sy::randn({4, 6}, D()), w = sy::randn({3, 6}, D()), b = sy::randn({3}, D());
  const sy::Tensor labels = sy::from_vector(std::vector<int32_t>{0, 1, 2, 1}, {4}, D());
  for (DType t : kHalves) {
    sy::autocast guard(t);
    ASSERT_EQ(sy::autocast_dtype(), t);
    const Tensor y = sy::linear(x, w, b);
    EXPECT_EQ(y.dtype(), t);
    EXPECT_EQ(sy::matmul(x, w, false, true).dtype(), t);
    EXPECT_EQ(sy::relu(y).dtype(), t);
    EXPECT_EQ(sy::softmax(y, 1).dtype(), DType::f32);
    EXPECT_EQ(sy::cross_entropy(y, labels).dtype(), DType::f32);
    EXPECT_EQ(sy::sum(y).dtype(), DType::f32);
    EXPECT_EQ(sy::exp(y).dtype(), DType::f32);
    EXPECT_EQ((y + sy::zeros({4, 3}, D())).dtype(), DType::f32) << "promoted";
    const Tensor img = sy::randn({2, 3, 4, 4}, D()).to(t), c3 = sy::ones({3}, D());
    EXPECT_EQ(
        sy::batch_norm(img, sy::zeros({3}, D()), c3, c3, sy::zeros({3}, D()), true, 0.1f, 1e-5f)
            .dtype(),
        t)
        << "batch norm keeps its input's dtype";
    {
      sy::autocast off(t, false);
      EXPECT_FALSE(sy::autocast_dtype().has_value());
      EXPECT_EQ(sy::linear(x, w, b).dtype(), DType::f32);
    }
    EXPECT_EQ(sy::autocast_dtype(), t);
    // The same values as casting by hand: the weights rounded, f32 accumulation.
    const Tensor by_hand = sy::linear(x.to(t), w.to(t), b.to(t));
    EXPECT_EQ(y.to_vector<float>(), by_hand.to_vector<float>());
  }
  EXPECT_FALSE(sy::autocast_dtype().has_value());
  EXPECT_EQ(sy::linear(x, w, b).dtype(), DType::f32);
  expect_error([] { sy::autocast bad(DType::i32); }, {"[autocast]", "bf16 or f16", "i32"});
}

// Training under autocast: f32 master weights get f32 gradients, equal to
// those of the same casts written by hand (backward outside autocast).
TEST_P(Half, AutocastBackwardGivesF32GradientsOfTheMasterWeights) {
  sy::manual_seed(7);
  const Tensor x = sy::randn({5, 8}, D());
  const Tensor labels = sy::from_vector(std::vector<int32_t>{0, 3, 1, 2, 3}, {5}, D());
  for (DType t : kHalves) {
    Tensor w = sy::randn({4, 8}, sy::Options(D()).requires_grad());
    Tensor loss;
    {
      sy::autocast guard(t);
      loss = sy::cross_entropy(sy::linear(x, w), labels);
    }
    EXPECT_EQ(loss.dtype(), DType::f32);
    loss.backward();
    EXPECT_EQ(w.grad().dtype(), DType::f32);
    const Tensor g = w.grad();
    w.zero_grad();
    {  // backward() inside the scope: the same (it runs outside autocast)
      sy::autocast guard(t);
      sy::cross_entropy(sy::linear(x, w), labels).backward();
    }
    EXPECT_EQ(g.to_vector<float>(), w.grad().to_vector<float>()) << sy::dtype_name(t);
    w.zero_grad();
    sy::cross_entropy(sy::linear(x.to(t), w.to(t)).to(DType::f32), labels).backward();
    EXPECT_EQ(g.to_vector<float>(), w.grad().to_vector<float>()) << sy::dtype_name(t);
  }
}

// GradScaler: an overflow skips the step and halves the scale; finite
// steps step, and the scale grows after growth_interval of them.
TEST_P(Half, GradScalerSkipsOverflowsBacksOffAndGrows) {
  Tensor w = sy::from_vector(std::vector<float>{1.f, -2.f}, {2}, sy::Options(D()).requires_grad());
  sy::optim::SGD opt({w}, 0.5f);
  sy::GradScaler scaler({.init_scale = 4.f, .growth_interval = 2});
  auto step = [&](float k) {  // loss = k * sum(w^2), gradient 2 k w
    opt.zero_grad();
    scaler.scale(sy::mul(sy::sum(sy::mul(w, w)), k)).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    return stepped;
  };
  EXPECT_TRUE(step(1.f));  // gradient (2, -4), unscaled exactly: w - 0.5 g
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0.f, 0.f}));
  w = sy::from_vector(std::vector<float>{1.f, -2.f}, {2}, sy::Options(D()).requires_grad());
  sy::optim::SGD opt2({w}, 0.5f);
  sy::GradScaler s2({.init_scale = 4.f, .growth_interval = 2});
  auto step2 = [&](float k) {
    opt2.zero_grad();
    s2.scale(sy::mul(sy::sum(sy::mul(w, w)), k)).backward();
    const bool stepped = s2.step(opt2);
    s2.update();
    return stepped;
  };
  EXPECT_FALSE(step2(6e37f));  // loss 3e38 is finite; times the scale 4 it overflows
  EXPECT_TRUE(s2.found_inf());
  EXPECT_EQ(s2.get_scale(), 2.f);
  EXPECT_EQ(s2.skipped_steps(), 1);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1.f, -2.f})) << "a skipped step changed w";
  EXPECT_TRUE(step2(0.25f));  // gradient (0.5, -1)
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0.75f, -1.5f}));
  EXPECT_EQ(s2.get_scale(), 2.f);
  EXPECT_TRUE(step2(0.f));
  EXPECT_EQ(s2.get_scale(), 4.f) << "two finite steps: grown";
  EXPECT_EQ(s2.growth_tracker(), 0);
  // NaN is caught too.
  EXPECT_FALSE(step2(NAN));
  EXPECT_EQ(s2.get_scale(), 2.f);
  // State for checkpoints.
  sy::GradScaler s3;
  s3.load_state_dict(s2.state_dict());
  EXPECT_EQ(s3.get_scale(), 2.f);
  expect_error(
      [&] {
        s3.load_state_dict({{"scale", sy::full({}, -1.f)}});
      },
      {"[GradScaler.load_state_dict]", "positive scale"});
  EXPECT_EQ(s3.get_scale(), 2.f) << "a refused state changed the scaler";
  // Two optimizers, one scaler: each unscaled once, one overflow skips only
  // its own step, and the update backs off; a second step() is an error.
  Tensor u = sy::from_vector(std::vector<float>{1.f}, {1}, sy::Options(D()).requires_grad());
  Tensor v = sy::from_vector(std::vector<float>{1.f}, {1}, sy::Options(D()).requires_grad());
  sy::optim::SGD ou({u}, 0.5f), ov({v}, 0.5f);
  sy::GradScaler s4({.init_scale = 8.f});
  s4.scale(sy::add(sy::sum(sy::mul(u, u)), sy::mul(sy::sum(v), 6e37f))).backward();
  EXPECT_TRUE(s4.step(ou));   // u's gradient 2 * 8 = 16, unscaled 2: u = 0
  EXPECT_FALSE(s4.step(ov));  // v's 6e37 * 8 overflows
  expect_error([&] { s4.step(ou); }, {"[GradScaler.step]", "one step() per optimizer"});
  s4.update();
  EXPECT_EQ(u.to_vector<float>(), std::vector<float>{0.f});
  EXPECT_EQ(v.to_vector<float>(), std::vector<float>{1.f});
  EXPECT_TRUE(s4.found_inf());
  EXPECT_EQ(s4.get_scale(), 4.f);
}

// An fp16 run's checkpoint holds the scaler's state; resuming restores it,
// and a checkpoint without it is refused before anything changes.
TEST_P(Half, CheckpointsKeepTheGradScalersState) {
  auto model = sy::models::mlp({4, 3}, sy::models::Activation::relu, D());
  sy::optim::SGD opt(model->parameters(), 0.1f);
  sy::GradScaler scaler({.init_scale = 1024.f, .growth_interval = 3});
  for (float k : {1.f, 1e38f, 1.f}) {  // clean, overflow (back off), clean
    opt.zero_grad();
    const Tensor y = (*model)(sy::ones({2, 4}, D()));
    scaler.scale(sy::mul(sy::sum(y), k)).backward();
    scaler.step(opt);
    scaler.update();
  }
  ASSERT_EQ(scaler.get_scale(), 512.f);
  ASSERT_EQ(scaler.growth_tracker(), 1);
  const std::string dir = temp_path("ckpt_" + device_param_name(GetParam()));
  std::filesystem::remove_all(dir);
  sy::models::save_checkpoint(dir, 1, *model, opt, "{}", &scaler);
  sy::GradScaler fresh;
  sy::models::load_checkpoint(dir, *model, opt, "{}", &fresh);
  EXPECT_EQ(fresh.get_scale(), 512.f);
  EXPECT_EQ(fresh.growth_tracker(), 1);
  const std::string plain = temp_path("ckpt_plain_" + device_param_name(GetParam()));
  std::filesystem::remove_all(plain);
  sy::models::save_checkpoint(plain, 1, *model, opt, "{}");
  expect_error([&] { sy::models::load_checkpoint(plain, *model, opt, "{}", &fresh); },
               {"expected the GradScaler's state"});
  EXPECT_EQ(fresh.get_scale(), 512.f);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

// bf16 and f16 tensors are saved as BF16 and F16 (2 bytes each) and read
// back bit for bit, on every device.
TEST_P(Half, SixteenBitTensorsRoundTripAsStored) {
  sy::Device& d = D();
  const std::string path = temp_path("half_" + device_param_name(GetParam()) + ".safetensors");
  const std::vector<float> v = {1.5f, -0.1f, 65504.f, 3e-6f, 1e20f, -0.f};
  const Tensor b = sy::from_vector(v, {2, 3}, sy::Options(d).dtype(sy::DType::bf16));
  const Tensor h = sy::from_vector(v, {6}, sy::Options(d).dtype(sy::DType::f16));
  sy::save_safetensors(path, {{"b", b}, {"h", h}});
  EXPECT_EQ(std::filesystem::file_size(path) % 8, 0u);
  sy::SafetensorsFile f(path);
  EXPECT_EQ(f.find("b")->dtype, "BF16");
  EXPECT_EQ(f.find("h")->dtype, "F16");
  EXPECT_EQ(f.find("b")->end - f.find("b")->begin, 12u);
  for (auto* target : {&d, &sy::cpu()}) {
    const Tensor b2 = f.tensor("b", *target), h2 = f.tensor("h", *target);
    EXPECT_EQ(b2.dtype(), sy::DType::bf16);
    EXPECT_EQ(b2.shape(), (sy::Shape{2, 3}));
    EXPECT_EQ(b2.to_vector<uint16_t>(), b.to_vector<uint16_t>());  // bits: -0 stays -0
    EXPECT_EQ(h2.to_vector<uint16_t>(), h.to_vector<uint16_t>());
    EXPECT_EQ(h2.to_vector<float>()[2], 65504.f);
  }
  std::filesystem::remove(path);
}

// A model saved in bf16 or f16 is a file about half the size, and loads
// into the f32 model as its weights rounded (then widened exactly).
TEST_P(Half, ModelFilesInSixteenBitsAreHalfTheSizeAndLoad) {
  sy::Device& d = D();
  sy::manual_seed(3);
  auto mp = sy::models::mlp({784, 256, 128, 10}, sy::models::Activation::relu, d);
  sy::nn::Module& m = *mp;
  const std::string f32_path =
      temp_path("mlp_f32_" + device_param_name(GetParam()) + ".safetensors");
  sy::nn::save(m, f32_path);
  for (sy::DType t : {sy::DType::bf16, sy::DType::f16}) {
    const std::string path = temp_path(std::string("mlp_") + sy::dtype_name(t) + "_" +
                                       device_param_name(GetParam()) + ".safetensors");
    sy::nn::save(m, path, t);
    const double ratio =
        double(std::filesystem::file_size(path)) / double(std::filesystem::file_size(f32_path));
    EXPECT_GT(ratio, 0.49);
    EXPECT_LT(ratio, 0.51);
    auto loaded = sy::nn::load(path, d);
    const auto want = m.state_dict();
    const auto got = loaded->state_dict();
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].second.dtype(), sy::DType::f32) << got[k].first;
      EXPECT_EQ(got[k].second.to_vector<float>(), want[k].second.to(t).to_vector<float>())
          << got[k].first;
    }
  }
  expect_error([&] { sy::nn::save(m, f32_path, sy::DType::i32); },
               {"[nn::save]", "expected a floating dtype", "found i32"});
  std::filesystem::remove_all(std::filesystem::path(f32_path).parent_path());
}

// PyTorch's switch: three names, anything else refused; devices without
// TF32 compute f32 GEMMs in FP32 whatever it says (the CUDA suites check
// the devices that have it).
TEST_P(Half, Float32MatmulPrecisionIsAProcessWideSwitch) {
  sy::Device& d = sy::device(GetParam());
  const std::string start = sy::float32_matmul_precision();
  expect_error(
      [] { sy::set_float32_matmul_precision("tf32"); },
      {"[set_float32_matmul_precision]", "\"highest\", \"high\" or \"medium\"", "found \"tf32\""});
  EXPECT_EQ(sy::float32_matmul_precision(), start);
  const float a = 1.f + 1.f / 4096.f;  // exact in FP32, 1 in TF32
  const sy::Tensor x = sy::from_vector(std::vector<float>{a, 0.f, 0.f, a}, {2, 2}, d);
  const sy::Tensor eye = sy::from_vector(std::vector<float>{1.f, 0.f, 0.f, 1.f}, {2, 2}, d);
  for (const char* p : {"high", "medium", "highest"}) {
    sy::set_float32_matmul_precision(p);
    EXPECT_EQ(sy::float32_matmul_precision(), p);
    const bool tf32_device = d.info().backend == "cuda" || d.info().backend == "cudaemu";
    if (!tf32_device) {
      EXPECT_EQ(sy::matmul(x, eye).to_vector<float>()[0], a) << p;
    }
  }
  sy::set_float32_matmul_precision(start);
}

INSTANTIATE_TEST_SUITE_P(Devices, Half, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& i) { return device_param_name(i.param); });
