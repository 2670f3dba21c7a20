// SPDX-License-Identifier: MIT
// Every op against a double-precision reference, on odd and tile-crossing
// shapes. Bound: normalized squared error below 1e-10 unless stated.
#include <sstream>

#include "helpers.h"

using sy::Tensor;

namespace {
constexpr double kTol = 1e-10;

std::vector<double> ref_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t M,
                               int64_t N, int64_t K, bool ta, bool tb) {
  std::vector<double> c(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        double x = ta ? a[size_t(k * M + i)] : a[size_t(i * K + k)];
        double y = tb ? b[size_t(j * K + k)] : b[size_t(k * N + j)];
        s += x * y;
      }
      c[size_t(i * N + j)] = s;
    }
  return c;
}
}  // namespace

struct MatmulCase {
  int64_t M, N, K;
};
std::string matmul_case_name(
    const ::testing::TestParamInfo<std::tuple<std::string, MatmulCase>>& i) {
  const MatmulCase& c = std::get<1>(i.param);
  std::string n = device_param_name(std::get<0>(i.param));
  n += "_M";
  n += std::to_string(c.M);
  n += "_N";
  n += std::to_string(c.N);
  n += "_K";
  n += std::to_string(c.K);
  return n;
}
using MatmulTest = DeviceTest<MatmulCase>;

TEST_P(MatmulTest, AllTransposesMatchReference) {
  auto [M, N, K] = C();
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      auto a = random_vec(size_t(M * K), 1), b = random_vec(size_t(K * N), 2);
      Tensor A = sy::from_vector(a, ta ? sy::Shape{K, M} : sy::Shape{M, K}, D());
      Tensor B = sy::from_vector(b, tb ? sy::Shape{N, K} : sy::Shape{K, N}, D());
      Tensor C = sy::matmul(A, B, ta, tb);
      ASSERT_EQ(C.shape(), (sy::Shape{M, N}));
      EXPECT_LT(nse(C.to_vector<float>(), ref_matmul(a, b, M, N, K, ta, tb)), kTol)
          << "ta=" << ta << " tb=" << tb;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulTest,
    ::testing::Combine(::testing::ValuesIn(conformance_devices()),
                       ::testing::Values(MatmulCase{1, 1, 1}, MatmulCase{3, 17, 5},
                                         MatmulCase{17, 255, 3}, MatmulCase{33, 300, 65},
                                         MatmulCase{128, 256, 784}, MatmulCase{255, 3, 1000},
                                         MatmulCase{4, 5, 0})),
    matmul_case_name);

TEST_P(OnDevice, OpsLinearWithBias) {
  int64_t B = 17, I = 33, O = 10;
  auto x = random_vec(size_t(B * I), 3), w = random_vec(size_t(O * I), 4),
       b = random_vec(size_t(O), 5);
  Tensor y = sy::linear(sy::from_vector(x, {B, I}, D()), sy::from_vector(w, {O, I}, D()),
                        sy::from_vector(b, {O}, D()));
  auto ref = ref_matmul(x, w, B, O, I, false, true);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < O; ++j) ref[size_t(i * O + j)] += b[size_t(j)];
  EXPECT_LT(nse(y.to_vector<float>(), ref), kTol);
}

TEST_P(OnDevice, OpsTranspose) {
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{3, 17}, {255, 1}, {64, 33}}) {
    auto v = random_vec(size_t(r * c), 6);
    auto t = sy::from_vector(v, {r, c}, D()).t().to_vector<float>();
    std::vector<double> ref(v.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) ref[size_t(j * r + i)] = v[size_t(i * c + j)];
    EXPECT_LT(nse(t, ref), kTol);
  }
}

struct BinCase {
  sy::Shape a, b, out;
};
std::string bin_case_name(const ::testing::TestParamInfo<std::tuple<std::string, BinCase>>& i) {
  std::string n = device_param_name(std::get<0>(i.param));
  n += "_case";
  n += std::to_string(i.index);
  for (auto d : std::get<1>(i.param).a) {
    n += '_';
    n += std::to_string(d);
  }
  n += "_with";
  for (auto d : std::get<1>(i.param).b) {
    n += '_';
    n += std::to_string(d);
  }
  return n;
}
using BinaryTest = DeviceTest<BinCase>;

TEST_P(BinaryTest, BroadcastingMatchesReference) {
  const BinCase& c = C();
  auto av = random_vec(size_t(sy::numel(c.a)), 7),
       bv = random_vec(size_t(sy::numel(c.b)), 8, 0.5f, 2.f);
  Tensor A = sy::from_vector(av, c.a, D()), B = sy::from_vector(bv, c.b, D());
  // Reference broadcast: right-aligned index mapping.
  auto idx = [](const sy::Shape& s, const sy::Shape& out, int64_t flat) {
    int64_t off = 0, stride = 1;
    for (int64_t d = int64_t(out.size()) - 1; d >= 0; --d) {
      int64_t coord = flat % out[d];
      flat /= out[d];
      int64_t sd = d - int64_t(out.size() - s.size());
      if (sd >= 0) {
        if (s[sd] != 1) off += coord * stride;
        stride *= s[sd];
      }
    }
    return off;
  };
  struct Op {
    const char* name;
    std::function<Tensor(Tensor, Tensor)> f;
    std::function<double(double, double)> r;
  };
  std::vector<Op> ops = {
      {"add", [](Tensor a, Tensor b) { return a + b; }, [](double a, double b) { return a + b; }},
      {"sub", [](Tensor a, Tensor b) { return a - b; }, [](double a, double b) { return a - b; }},
      {"mul", [](Tensor a, Tensor b) { return a * b; }, [](double a, double b) { return a * b; }},
      {"div", [](Tensor a, Tensor b) { return a / b; }, [](double a, double b) { return a / b; }},
  };
  for (auto& op : ops) {
    Tensor y = op.f(A, B);
    ASSERT_EQ(y.shape(), c.out) << op.name;
    std::vector<double> ref(size_t(sy::numel(c.out)));
    for (size_t k = 0; k < ref.size(); ++k)
      ref[k] =
          op.r(av[size_t(idx(c.a, c.out, int64_t(k)))], bv[size_t(idx(c.b, c.out, int64_t(k)))]);
    EXPECT_LT(nse(y.to_vector<float>(), ref), kTol) << op.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BinaryTest,
    ::testing::Combine(::testing::ValuesIn(conformance_devices()),
                       ::testing::Values(
                           BinCase{{4, 5}, {4, 5}, {4, 5}}, BinCase{{17, 255}, {255}, {17, 255}},
                           BinCase{{17, 3}, {17, 1}, {17, 3}}, BinCase{{3, 1000}, {1}, {3, 1000}},
                           BinCase{{1}, {3, 4}, {3, 4}}, BinCase{{2, 3, 4}, {3, 1}, {2, 3, 4}},
                           BinCase{{2, 1, 3, 4}, {5, 1, 4}, {2, 5, 3, 4}},
                           BinCase{{300, 400}, {300, 400}, {300, 400}})),
    bin_case_name);

TEST_P(OnDevice, OpsScalarArithmetic) {
  auto v = random_vec(1000, 9, 0.5f, 2.f);
  Tensor x = sy::from_vector(v, {10, 100}, D());
  std::vector<std::pair<Tensor, std::function<double(double)>>> cases = {
      {x + 2.f, [](double a) { return a + 2; }}, {x - 2.f, [](double a) { return a - 2; }},
      {x * 3.f, [](double a) { return a * 3; }}, {x / 4.f, [](double a) { return a / 4; }},
      {5.f - x, [](double a) { return 5 - a; }}, {-x, [](double a) { return -a; }},
      {2.f * x, [](double a) { return 2 * a; }}, {1.f + x, [](double a) { return 1 + a; }},
  };
  for (auto& [t, f] : cases) {
    std::vector<double> ref;
    for (float a : v) ref.push_back(f(a));
    EXPECT_LT(nse(t.to_vector<float>(), ref), kTol);
  }
}

TEST_P(OnDevice, DropoutDropsWithTheSameMaskOnEveryDeviceAndIsIdentityInEval) {
  const int64_t n = 20000;
  Tensor x = sy::ones({4, n / 4}, D());
  sy::manual_seed(42);
  auto y = sy::dropout(x, 0.3f).to_vector<float>();
  size_t dropped = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.f || std::abs(v - 1.f / 0.7f) < 1e-6f) << v;
    dropped += v == 0.f;
  }
  EXPECT_NEAR(double(dropped) / double(n), 0.3, 0.015);  // ~10 standard deviations
  // The same seed gives the same mask here as on the CPU.
  sy::manual_seed(42);
  EXPECT_EQ(sy::dropout(sy::ones({4, n / 4}), 0.3f).to_vector<float>(), y);
  // A gradient flows through the kept elements only, scaled alike.
  Tensor w = sy::ones({4, n / 4}, D()).requires_grad_();
  sy::manual_seed(42);
  sy::sum(sy::dropout(w, 0.3f)).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), y);
  EXPECT_EQ(sy::dropout(x, 0.3f, /*training=*/false).impl(), x.impl());
  EXPECT_EQ(sy::dropout(x, 1.f).sum().item(), 0.f);
  // nn::Dropout follows train()/eval().
  sy::nn::Sequential m;
  m.add(std::make_shared<sy::nn::Dropout>(0.5f));
  m.eval();
  EXPECT_EQ(m(x).to_vector<float>(), x.to_vector<float>());
  m.train();
  EXPECT_NE(m(x).to_vector<float>(), x.to_vector<float>());
  expect_error([&] { sy::dropout(x, 1.5f); }, {"dropout", "probability p in [0, 1]", "1.5"});
}

TEST_P(OnDevice, LayerNormMatchesTheReference) {
  const int64_t rows = 5, n = 33;
  auto v = random_vec(size_t(rows * n), 12, -3.f, 3.f);
  auto wv = random_vec(size_t(n), 13, 0.5f, 1.5f), bv = random_vec(size_t(n), 14);
  Tensor x = sy::from_vector(v, {rows, n}, D());
  Tensor y = sy::layer_norm(x, sy::from_vector(wv, {n}, D()), sy::from_vector(bv, {n}, D()));
  std::vector<double> ref;
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mu += v[size_t(r * n + j)];
    mu /= double(n);
    for (int64_t j = 0; j < n; ++j) var += std::pow(v[size_t(r * n + j)] - mu, 2);
    var /= double(n);
    for (int64_t j = 0; j < n; ++j)
      ref.push_back((v[size_t(r * n + j)] - mu) / std::sqrt(var + 1e-5) * wv[size_t(j)] +
                    bv[size_t(j)]);
  }
  EXPECT_LT(nse(y.to_vector<float>(), ref), 1e-10);
  sy::nn::LayerNorm ln(n, 1e-5f, true, D());
  EXPECT_EQ(ln.state_dict()[0].first, "weight");
  EXPECT_EQ(ln.state_dict()[1].first, "bias");
  EXPECT_EQ(ln(x).shape(), (sy::Shape{rows, n}));
  expect_error([&] { ln(sy::zeros({2, 4}, D())); }, {"LayerNorm", "last dimension of 33"});
  expect_error([&] { sy::layer_norm(x, sy::ones({4}, D())); },
               {"layer_norm", "expected weight and bias of shape (33)"});
}

TEST_P(OnDevice, OpsActivations) {
  auto v = random_vec(255 * 3, 10, -4.f, 4.f);
  auto pos = random_vec(255, 11, 0.1f, 5.f);
  Tensor x = sy::from_vector(v, {3, 255}, D()), p = sy::from_vector(pos, {255}, D());
  auto check = [](Tensor t, const std::vector<float>& in, double (*f)(double), const char* name) {
    std::vector<double> ref;
    for (float a : in) ref.push_back(f(a));
    EXPECT_LT(nse(t.to_vector<float>(), ref), 1e-9) << name;
  };
  check(
      sy::relu(x), v, [](double a) { return a > 0 ? a : 0.0; }, "relu");
  check(
      sy::gelu(x), v,
      [](double a) {
        return 0.5 * a * (1 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
      },
      "gelu");
  check(
      sy::tanh(x), v, [](double a) { return std::tanh(a); }, "tanh");
  check(
      sy::sigmoid(x), v, [](double a) { return 1 / (1 + std::exp(-a)); }, "sigmoid");
  check(
      sy::exp(x), v, [](double a) { return std::exp(a); }, "exp");
  check(
      sy::square(x), v, [](double a) { return a * a; }, "square");
  check(
      sy::log(p), pos, [](double a) { return std::log(a); }, "log");
  check(
      sy::sqrt(p), pos, [](double a) { return std::sqrt(a); }, "sqrt");
  check(
      sy::abs(x), v, [](double a) { return std::fabs(a); }, "abs");
}

// The libtorch-style methods are the free functions under another name.
TEST_P(OnDevice, OpsAsTensorMethods) {
  auto v = random_vec(4 * 6, 12, -3.f, 3.f);
  Tensor x = sy::from_vector(v, {4, 6}, D()),
         w = sy::from_vector(random_vec(6 * 5, 13), {6, 5}, D());
  auto same = [](const Tensor& a, const Tensor& b, const char* name) {
    EXPECT_EQ(a.shape(), b.shape()) << name;
    EXPECT_EQ(a.dtype(), b.dtype()) << name;
    if (a.dtype() == sy::DType::i32)
      EXPECT_EQ(a.to_vector<int32_t>(), b.to_vector<int32_t>()) << name;
    else if (a.dtype() == sy::DType::u8)
      EXPECT_EQ(a.to_vector<uint8_t>(), b.to_vector<uint8_t>()) << name;
    else
      EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>()) << name;
  };
  same(x.sum(), sy::sum(x), "sum");
  same(x.sum(1), sy::sum(x, 1), "sum(dim)");
  same(x.sum(0, true), sy::sum(x, 0, true), "sum(dim, keepdim)");
  same(x.mean(), sy::mean(x), "mean");
  same(x.mean(-1), sy::mean(x, -1), "mean(dim)");
  same(x.matmul(w), sy::matmul(x, w), "matmul");
  same(x.relu(), sy::relu(x), "relu");
  same(x.gelu(), sy::gelu(x), "gelu");
  same(x.sigmoid(), sy::sigmoid(x), "sigmoid");
  same(x.tanh(), sy::tanh(x), "tanh");
  same(x.exp(), sy::exp(x), "exp");
  same(x.abs().log(), sy::log(sy::abs(x)), "abs, log");
  same(x.square().sqrt(), sy::sqrt(sy::square(x)), "square, sqrt");
  same(x.neg(), -x, "neg");
  same(x.softmax(1), sy::softmax(x, 1), "softmax");
  same(x.log_softmax(-1), sy::log_softmax(x), "log_softmax");
  same(x.argmax(1), sy::argmax(x, 1), "argmax");
  same(x.eq(x), sy::eq(x, x), "eq");
  same(x.gt(w.sum()), sy::gt(x, w.sum()), "gt");
}

TEST_P(OnDevice, ComparisonsGiveU8MasksThatCount) {
  std::vector<float> a{-1.f, 0.f, 2.f, 2.f, 3.5f, -7.f};
  std::vector<float> b{0.f, 0.f, 1.f, 2.f, 4.f, -8.f};
  Tensor A = sy::from_vector(a, {2, 3}, D()), B = sy::from_vector(b, {2, 3}, D());
  auto check = [&](const Tensor& t, auto pred, const char* what) {
    ASSERT_EQ(t.dtype(), sy::DType::u8) << what;
    ASSERT_EQ(t.shape(), (sy::Shape{2, 3})) << what;
    auto v = t.to_vector<uint8_t>();
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(v[i], pred(a[i], b[i]) ? 1 : 0) << what << " at " << i;
  };
  check(
      A == B, [](float x, float y) { return x == y; }, "==");
  check(
      A != B, [](float x, float y) { return x != y; }, "!=");
  check(
      A < B, [](float x, float y) { return x < y; }, "<");
  check(
      A <= B, [](float x, float y) { return x <= y; }, "<=");
  check(
      A > B, [](float x, float y) { return x > y; }, ">");
  check(
      A >= B, [](float x, float y) { return x >= y; }, ">=");
  check(
      A.gt(1.5f), [](float x, float) { return x > 1.5f; }, "gt(scalar)");
  check(
      A.le(0.f), [](float x, float) { return x <= 0.f; }, "le(scalar)");
  check(
      A == 2.f, [](float x, float) { return x == 2.f; }, "== scalar");
  check(
      2.f == A, [](float x, float) { return x == 2.f; }, "scalar ==");
  check(
      0.f < A, [](float x, float) { return 0.f < x; }, "scalar <");
  check(
      2.f >= A, [](float x, float) { return 2.f >= x; }, "scalar >=");
  // Broadcasting: (2, 3) against a row.
  Tensor row = sy::from_vector(std::vector<float>{0.f, 0.f, 2.f}, {3}, D());
  EXPECT_EQ((A >= row).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 1, 1, 0}));
  // Accuracy as PyTorch users write it: argmax (i32) against i32 labels,
  // the mask summed to a count.
  Tensor logits = sy::from_vector(std::vector<float>{0, 5, 1, 9, 0, 0, 0, 0, 3}, {3, 3}, D());
  Tensor labels = sy::from_vector(std::vector<int32_t>{1, 0, 1}, {3}, D());
  Tensor hit = logits.argmax(1) == labels;
  EXPECT_EQ(hit.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_EQ(hit.sum().item(), 2.f);
  EXPECT_FLOAT_EQ(hit.mean().item(), 2.f / 3.f);
  EXPECT_EQ(labels.sum().item(), 2.f);  // i32 sums in f32
  // No gradient flows through a comparison.
  Tensor w = sy::from_vector(a, {2, 3}, D()).requires_grad_();
  EXPECT_FALSE((w > 0.f).requires_grad());
}

// Reference broadcast of a op b over any number of dims.
static std::vector<double> ref_broadcast(const std::vector<float>& a, const sy::Shape& sa,
                                         const std::vector<float>& b, const sy::Shape& sb,
                                         sy::Shape& out) {
  size_t nd = std::max(sa.size(), sb.size());
  auto pad = [&](const sy::Shape& s) {
    sy::Shape p(nd - s.size(), 1);
    p.insert(p.end(), s.begin(), s.end());
    return p;
  };
  sy::Shape pa = pad(sa), pb = pad(sb);
  out.assign(nd, 1);
  for (size_t i = 0; i < nd; ++i) out[i] = std::max(pa[i], pb[i]);
  std::vector<double> r(size_t(sy::numel(out)));
  std::vector<int64_t> idx(nd, 0);
  for (size_t j = 0; j < r.size(); ++j) {
    int64_t rem = int64_t(j), ia = 0, ib = 0, ma = 1, mb = 1;
    for (size_t k = nd; k-- > 0;) {
      idx[k] = rem % out[k];
      rem /= out[k];
      ia += (pa[k] == 1 ? 0 : idx[k]) * ma, ma *= pa[k];
      ib += (pb[k] == 1 ? 0 : idx[k]) * mb, mb *= pb[k];
    }
    r[j] = double(a[size_t(ia)]) * double(b[size_t(ib)]);
  }
  return r;
}

TEST_P(OnDevice, BroadcastingTakesAnyNumberOfDimensions) {
  // Shapes beyond 4-D whose broadcast pattern merges into 4 dimensions.
  std::vector<std::pair<sy::Shape, sy::Shape>> cases = {
      {{2, 3, 4, 5, 6}, {2, 3, 4, 5, 6}},        // same shape: one dimension
      {{2, 3, 4, 5, 6}, {6}},                    // a row
      {{2, 3, 4, 5, 6, 2}, {3, 4, 1, 1, 2}},     // six dims, mixed
      {{1, 2, 1, 3, 1, 4, 1}, {5, 1, 1, 1, 1}},  // size-1 dims dropped
  };
  for (auto& [sa, sb] : cases) {
    auto a = random_vec(size_t(sy::numel(sa)), 3), b = random_vec(size_t(sy::numel(sb)), 4);
    sy::Shape out;
    auto want = ref_broadcast(a, sa, b, sb, out);
    Tensor y = sy::from_vector(a, sa, D()) * sy::from_vector(b, sb, D());
    ASSERT_EQ(y.shape(), out) << sy::shape_str(sa) << " * " << sy::shape_str(sb);
    EXPECT_LT(nse(y.to_vector<float>(), want), kTol)
        << sy::shape_str(sa) << " * " << sy::shape_str(sb);
  }
  // Gradients of a 5-D broadcast reduce back to each operand's shape.
  Tensor x = sy::ones({2, 3, 1, 1, 2}, D()).requires_grad_();
  Tensor w = sy::ones({4, 5, 1}, D()).requires_grad_();
  sy::sum(x * w).backward();
  ASSERT_EQ(x.grad().shape(), x.shape());
  ASSERT_EQ(w.grad().shape(), w.shape());
  for (float g : x.grad().to_vector<float>()) EXPECT_EQ(g, 20.f);  // 4 * 5 products each
  for (float g : w.grad().to_vector<float>()) EXPECT_EQ(g, 12.f);  // 2 * 3 * 2
}

TEST_P(OnDevice, MatmulTakesPyTorchsOtherShapes) {
  const int64_t B = 3, T = 5, K = 7, N = 4;
  auto a = random_vec(size_t(B * T * K), 5), w = random_vec(size_t(K * N), 6);
  Tensor A = sy::from_vector(a, {B, T, K}, D()).requires_grad_();
  Tensor W = sy::from_vector(w, {K, N}, D()).requires_grad_();
  Tensor Y = sy::matmul(A, W);  // (B, T, K) x (K, N)
  ASSERT_EQ(Y.shape(), (sy::Shape{B, T, N}));
  EXPECT_LT(nse(Y.to_vector<float>(), ref_matmul(a, w, B * T, N, K, false, false)), kTol);
  sy::sum(Y).backward();
  ASSERT_EQ(A.grad().shape(), A.shape());
  ASSERT_EQ(W.grad().shape(), W.shape());
  // d sum(A W) / dA[., k] = sum_n W[k, n]
  auto ga = A.grad().to_vector<float>();
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t k = 0; k < K; ++k) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) s += w[size_t(k * N + n)];
      EXPECT_NEAR(ga[size_t(r * K + k)], s, 1e-4);
    }
  // Vectors: (K) x (K, N) -> (N); (B*T, K) x (K) -> (B*T); (K) x (K) -> ().
  Tensor v = sy::from_vector(std::vector<float>(w.begin(), w.begin() + K), {K}, D());
  Tensor vw = sy::matmul(v, W.detach());
  ASSERT_EQ(vw.shape(), (sy::Shape{N}));
  Tensor av = sy::matmul(A.detach().reshape({B * T, K}), v);
  ASSERT_EQ(av.shape(), (sy::Shape{B * T}));
  Tensor vv = sy::matmul(v, v);
  ASSERT_EQ(vv.shape(), (sy::Shape{}));
  double dot = 0;
  for (int64_t k = 0; k < K; ++k) dot += double(w[size_t(k)]) * w[size_t(k)];
  EXPECT_NEAR(vv.item(), dot, 1e-4);
  auto ref_av =
      ref_matmul(a, std::vector<float>(w.begin(), w.begin() + K), B * T, 1, K, false, false);
  EXPECT_LT(nse(av.to_vector<float>(), ref_av), kTol);
  // linear on (B, T, in), as nn.Linear: the same as on (B*T, in).
  Tensor lw = sy::from_vector(random_vec(size_t(N * K), 8), {N, K}, D());
  Tensor lb = sy::from_vector(random_vec(size_t(N), 9), {N}, D());
  Tensor l3 = sy::linear(A.detach(), lw, lb);
  ASSERT_EQ(l3.shape(), (sy::Shape{B, T, N}));
  EXPECT_EQ(l3.to_vector<float>(),
            sy::linear(A.detach().reshape({B * T, K}), lw, lb).to_vector<float>());
}

TEST_P(OnDevice, Int64TensorsCarryLabelsAsInPyTorch) {
  // Round trip, including values beyond i32.
  const std::vector<int64_t> v{-3, 0, 7, (int64_t(1) << 40) + 5, -(int64_t(1) << 35), 2};
  Tensor t = sy::from_vector(v, {2, 3}, D());
  EXPECT_EQ(t.dtype(), sy::DType::i64);
  EXPECT_EQ(t.to_vector<int64_t>(), v);
  EXPECT_EQ(t.t().t().to_vector<int64_t>(), v);  // transpose of 8-byte elements
  EXPECT_EQ(t.to(sy::DType::i32).to_vector<int32_t>(),
            (std::vector<int32_t>{-3, 0, 7, INT32_MAX, INT32_MIN, 2}));  // saturated
  EXPECT_EQ(sy::from_vector(std::vector<int32_t>{-1, 5}, {2}, D())
                .to(sy::DType::i64)
                .to_vector<int64_t>(),
            (std::vector<int64_t>{-1, 5}));
  EXPECT_EQ(sy::zeros({3}, sy::Options(D()).dtype(sy::DType::i64)).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(sy::arange(4, sy::Options(D()).dtype(sy::DType::i64)).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(sy::from_vector(std::vector<int64_t>{7}, {1}, D()).item(), 7.f);
  std::ostringstream os;
  os << t;
  EXPECT_NE(os.str().find("dtype=i64"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("1099511627781"), std::string::npos) << os.str();  // exact
  // cross_entropy takes i64 labels: the same loss and gradient as i32 ones.
  auto logits_v = random_vec(4 * 5, 11);
  Tensor a = sy::from_vector(logits_v, {4, 5}, D()).requires_grad_();
  Tensor b = sy::from_vector(logits_v, {4, 5}, D()).requires_grad_();
  Tensor l64 = sy::cross_entropy(a, sy::from_vector(std::vector<int64_t>{0, 4, 2, 1}, {4}, D()));
  Tensor l32 = sy::cross_entropy(b, sy::from_vector(std::vector<int32_t>{0, 4, 2, 1}, {4}, D()));
  l64.backward();
  l32.backward();
  EXPECT_EQ(l64.item(), l32.item());
  EXPECT_EQ(a.grad().to_vector<float>(), b.grad().to_vector<float>());
  // Comparisons and sums take them: accuracy against i64 labels.
  Tensor labels = sy::from_vector(std::vector<int64_t>{1, 0, 3, 1}, {4}, D());
  Tensor pred = sy::from_vector(std::vector<int32_t>{1, 2, 3, 1}, {4}, D());
  EXPECT_EQ((pred == labels).sum().item(), 3.f);
  // Negative i64 values convert exactly (PyTorch's ignore_index is -100).
  Tensor neg = sy::from_vector(std::vector<int64_t>{-100, -1, 5, -463}, {4}, D());
  EXPECT_EQ(neg.to(sy::DType::f32).to_vector<float>(), (std::vector<float>{-100, -1, 5, -463}));
  EXPECT_EQ((neg != -100.f).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(neg.sum().item(), -559.f);
  // A label beyond i32 stays out of range (saturated), so it is reported.
  Tensor far = sy::from_vector(std::vector<int64_t>{0, (int64_t(1) << 32) + 1, 2, 1}, {4}, D());
  expect_error([&] { (void)sy::cross_entropy(a.detach(), far).item(); },
               {"cross_entropy", "labels"});
}

TEST_P(OnDevice, OpsRandintIsInRangeAndSeeded) {
  sy::manual_seed(7);
  Tensor r = sy::randint(-3, 5, {4000}, D());
  EXPECT_EQ(r.dtype(), sy::DType::i32);
  auto v = r.to_vector<int32_t>();
  std::vector<int> seen(8, 0);
  for (int32_t a : v) {
    ASSERT_GE(a, -3);
    ASSERT_LT(a, 5);
    ++seen[size_t(a + 3)];
  }
  for (int c : seen) EXPECT_GT(c, 350) << "every value in [-3, 5) drawn about 500 times";
  sy::manual_seed(7);
  EXPECT_EQ(sy::randint(-3, 5, {4000}, D()).to_vector<int32_t>(), v) << "same seed, same integers";
  EXPECT_EQ(sy::randint(0, 10, {3}, sy::TensorOptions(D()).dtype(sy::DType::f32)).dtype(),
            sy::DType::f32);
  EXPECT_THROW(sy::randint(5, 5, {1}, D()), sy::Error);
}

TEST_P(OnDevice, PrintingShowsValues) {
  std::ostringstream small, big;
  small << sy::from_vector(std::vector<float>{1.5f, -2.f}, {2}, D());
  EXPECT_NE(small.str().find("values=[1.5, -2]"), std::string::npos) << small.str();
  big << sy::arange(5000, D());
  EXPECT_NE(big.str().find("values=[0, 1, 2, ..., 4997, 4998, 4999]"), std::string::npos)
      << big.str();
}

TEST_P(OnDevice, OpsReductions) {
  int64_t A = 3, B = 17, C = 5;
  auto v = random_vec(size_t(A * B * C), 12);
  Tensor x = sy::from_vector(v, {A, B, C}, D());
  double all = 0;
  for (float a : v) all += a;
  EXPECT_LT(nse(sy::sum(x).to_vector<float>(), {all}), kTol);
  EXPECT_LT(nse(sy::mean(x).to_vector<float>(), {all / double(v.size())}), kTol);
  EXPECT_EQ(sy::sum(x).dim(), 0);
  for (int64_t axis = 0; axis < 3; ++axis) {
    sy::Shape s{A, B, C};
    int64_t len = s[axis];
    sy::Shape out = s;
    out.erase(out.begin() + axis);
    std::vector<double> ref(size_t(sy::numel(out)), 0.0);
    for (int64_t i = 0; i < A; ++i)
      for (int64_t j = 0; j < B; ++j)
        for (int64_t k = 0; k < C; ++k) {
          int64_t c[3] = {i, j, k};
          std::vector<int64_t> rest;  // the coordinates that remain, in order
          for (int d = 0; d < 3; ++d)
            if (d != axis) rest.push_back(c[d]);
          int64_t o = rest[0] * out[1] + rest[1];
          ref[size_t(o)] += v[size_t((i * B + j) * C + k)];
        }
    Tensor s1 = sy::sum(x, axis);
    EXPECT_EQ(s1.shape(), out);
    EXPECT_LT(nse(s1.to_vector<float>(), ref), kTol) << "axis " << axis;
    Tensor m1 = sy::mean(x, axis, true);
    sy::Shape kd = s;
    kd[axis] = 1;
    EXPECT_EQ(m1.shape(), kd);
    for (auto& r : ref) r /= double(len);
    EXPECT_LT(nse(m1.to_vector<float>(), ref), kTol) << "mean axis " << axis;
  }
  EXPECT_LT(nse(sy::sum(x, -1).to_vector<float>(), to_d(sy::sum(x, 2).to_vector<float>())), 1e-14);
}

TEST_P(OnDevice, OpsExpandAndSumTo) {
  auto v = random_vec(5, 13);
  Tensor x = sy::from_vector(v, {5}, D());
  Tensor e = sy::expand(x, {3, 5});
  std::vector<double> ref;
  for (int r = 0; r < 3; ++r)
    for (float a : v) ref.push_back(a);
  EXPECT_LT(nse(e.to_vector<float>(), ref), kTol);
  Tensor s = sy::sum_to(e, {5});
  std::vector<double> ref2;
  for (float a : v) ref2.push_back(3.0 * a);
  EXPECT_LT(nse(s.to_vector<float>(), ref2), kTol);
  Tensor c = sy::expand(sy::from_vector(v, {5, 1}, D()), {2, 5, 4});
  EXPECT_EQ(c.shape(), (sy::Shape{2, 5, 4}));
  auto cv = c.to_vector<float>();
  EXPECT_FLOAT_EQ(cv[1 * 20 + 3 * 4 + 2], v[3]);
}

TEST_P(OnDevice, OpsSoftmaxFamily) {
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{17, 10}, {3, 1000}, {1, 1}}) {
    auto v = random_vec(size_t(r * c), 14, -5.f, 5.f);
    Tensor x = sy::from_vector(v, {r, c}, D());
    std::vector<double> sm(v.size()), lsm(v.size());
    for (int64_t i = 0; i < r; ++i) {
      double m = -1e300, s = 0;
      for (int64_t j = 0; j < c; ++j) m = std::max(m, double(v[size_t(i * c + j)]));
      for (int64_t j = 0; j < c; ++j) s += std::exp(v[size_t(i * c + j)] - m);
      for (int64_t j = 0; j < c; ++j) {
        sm[size_t(i * c + j)] = std::exp(v[size_t(i * c + j)] - m) / s;
        lsm[size_t(i * c + j)] = v[size_t(i * c + j)] - m - std::log(s);
      }
    }
    EXPECT_LT(nse(sy::softmax(x).to_vector<float>(), sm), kTol);
    EXPECT_LT(nse(sy::log_softmax(x, 1).to_vector<float>(), lsm), kTol);
  }
}

TEST_P(OnDevice, OpsLossesAndArgmax) {
  int64_t B = 17, C = 10;
  auto v = random_vec(size_t(B * C), 15, -3.f, 3.f);
  std::vector<int32_t> lab(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) lab[size_t(i)] = int32_t((i * 7) % C);
  Tensor x = sy::from_vector(v, {B, C}, D());
  Tensor y = sy::from_vector(lab, {B}, D());
  double ce = 0;
  std::vector<int32_t> am(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    double m = -1e300, s = 0;
    int32_t best = 0;
    for (int64_t j = 0; j < C; ++j) {
      if (v[size_t(i * C + j)] > v[size_t(i * C + best)]) best = int32_t(j);
      m = std::max(m, double(v[size_t(i * C + j)]));
    }
    for (int64_t j = 0; j < C; ++j) s += std::exp(v[size_t(i * C + j)] - m);
    ce += m + std::log(s) - v[size_t(i * C + lab[size_t(i)])];
    am[size_t(i)] = best;
  }
  EXPECT_LT(nse(sy::cross_entropy(x, y).to_vector<float>(), {ce / double(B)}), kTol);
  EXPECT_EQ(sy::argmax(x).to_vector<int32_t>(), am);
  auto t = random_vec(size_t(B * C), 16);
  double mse = 0;
  for (size_t i = 0; i < v.size(); ++i) mse += (double(v[i]) - t[i]) * (double(v[i]) - t[i]);
  EXPECT_LT(nse(sy::mse_loss(x, sy::from_vector(t, {B, C}, D())).to_vector<float>(),
                {mse / double(v.size())}),
            kTol);
}

TEST_P(OnDevice, OpsFactoriesAndRandom) {
  EXPECT_EQ(sy::zeros({2, 3}, D()).to_vector<float>(), std::vector<float>(6, 0.f));
  EXPECT_EQ(sy::ones({4}, D()).to_vector<float>(), std::vector<float>(4, 1.f));
  EXPECT_EQ(sy::full({2}, 2.5f, D()).to_vector<float>(), std::vector<float>(2, 2.5f));
  EXPECT_EQ(sy::arange(4, D()).to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(sy::arange(3, sy::Options(D()).dtype(sy::DType::i32)).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 1, 2}));
  sy::manual_seed(42);
  auto u = sy::rand({100000}, D()).to_vector<float>();
  auto n = sy::randn({100000}, D()).to_vector<float>();
  double mu = 0, mn = 0, vn = 0;
  for (float a : u) {
    EXPECT_GE(a, 0.f);
    EXPECT_LT(a, 1.f);
    mu += a;
  }
  for (float a : n) {
    mn += a;
    vn += double(a) * a;
  }
  mu /= double(u.size()), mn /= double(n.size()), vn = vn / double(n.size()) - mn * mn;
  EXPECT_NEAR(mu, 0.5, 0.01);
  EXPECT_NEAR(mn, 0.0, 0.02);
  EXPECT_NEAR(vn, 1.0, 0.02);
  sy::manual_seed(42);
  EXPECT_EQ(sy::rand({100000}, D()).to_vector<float>(), u) << "same seed, same numbers";
  EXPECT_NE(sy::rand({100000}, D()).to_vector<float>(), u) << "next draw differs";
  auto w = sy::uniform({1000}, -2.f, 3.f, D()).to_vector<float>();
  for (float a : w) {
    EXPECT_GE(a, -2.f);
    EXPECT_LT(a, 3.f);
  }
}

TEST_P(OnDevice, OpsCastsAndDtypes) {
  std::vector<uint8_t> b{0, 7, 255};
  Tensor u = sy::from_vector(b, {3}, D());
  EXPECT_EQ(u.dtype(), sy::DType::u8);
  EXPECT_EQ(u.to(sy::DType::f32).to_vector<float>(), (std::vector<float>{0, 7, 255}));
  Tensor f = sy::from_vector(std::vector<float>{1.9f, -2.5f, 3.f}, {3}, D());
  EXPECT_EQ(f.to(sy::DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_FLOAT_EQ(sy::from_vector(std::vector<int32_t>{7}, {1}, D()).item(), 7.f);
}

TEST_P(OnDevice, OpsViewsShareStorageAndComposeWithOps) {
  auto v = random_vec(24, 17);
  Tensor x = sy::from_vector(v, {6, 4}, D());
  Tensor s = x.slice(2, 5);
  EXPECT_EQ(s.shape(), (sy::Shape{3, 4}));
  EXPECT_EQ(s.to_vector<float>(), std::vector<float>(v.begin() + 8, v.begin() + 20));
  Tensor r = x.reshape({-1});
  EXPECT_EQ(r.shape(), (sy::Shape{24}));
  EXPECT_EQ(x.view({4, 6}).to_vector<float>(), v);
  // Views of pending values: (x*2) sliced, reshaped, then used by another op.
  Tensor y = (x * 2.f).slice(1, 3).reshape({2, 2, 2}) + 1.f;
  auto yv = y.to_vector<float>();
  for (size_t k = 0; k < 8; ++k) EXPECT_FLOAT_EQ(yv[k], v[4 + k] * 2.f + 1.f);
  EXPECT_EQ(x.flatten().shape(), (sy::Shape{6, 4}));
  EXPECT_EQ(sy::zeros({2, 3, 4}, D()).flatten().shape(), (sy::Shape{2, 12}));
}

TEST_P(OnDevice, OpsEqualityMask) {
  Tensor a = sy::from_vector(std::vector<float>{1, 2, 3}, {3}, D());
  Tensor b = sy::from_vector(std::vector<float>{1, 0, 3}, {3}, D());
  EXPECT_EQ(sy::eq(a, b).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
}

// The kernel table drives coverage: running every public op once must launch
// every kernel in the table, so a kernel cannot be added without an op and a
// test that reaches it.
TEST_P(OnDevice, KernelTableEveryKernelIsReachedByTheOps) {
  sy::BackendDevice& d = D();
  auto before = d.counters();
  Tensor x = sy::rand({4, 3}, D()).requires_grad_();
  Tensor w = sy::randn({5, 3}, D()).requires_grad_();
  Tensor b = sy::arange(5, D()).requires_grad_();
  Tensor h = sy::linear(x, w, b);
  Tensor y = sy::relu(h) * sy::sum(h, 0) + sy::mean(h) - sy::softmax(h) / 2.f;
  Tensor loss = sy::cross_entropy(sy::log_softmax(y),
                                  sy::from_vector(std::vector<int32_t>{0, 1, 2, 3}, {4}, D())) +
                sy::sum(sy::expand(sy::transpose(x).slice(0, 1), {2, 4}));
  // Convolution, pooling, batch norm, bmm and embedding, forward and backward.
  Tensor img = sy::rand({2, 2, 6, 6}, D()).requires_grad_();
  Tensor k = sy::randn({4, 2, 3, 3}, D()).requires_grad_();
  // Both lowerings of conv2d (ops.h's ConvAlgorithm), the default's last.
  const sy::ConvAlgorithm was = sy::conv_algorithm();
  sy::set_conv_algorithm(sy::ConvAlgorithm::implicit_gemm);
  Tensor c0 = sy::conv2d(img, k, sy::ones({4}, D()), 1, 1);
  sy::set_conv_algorithm(sy::ConvAlgorithm::im2col);
  Tensor c = sy::conv2d(img, k, sy::ones({4}, D()), 1, 1) + c0;
  sy::set_conv_algorithm(was);
  Tensor p = sy::max_pool2d(sy::dropout(c, 0.25f, true), 2) + sy::avg_pool2d(c, 2);
  Tensor q = sy::bmm(p.reshape({8, 3, 3}), p.reshape({8, 3, 3}));
  loss = loss + sy::sum(sy::batch_norm(q.reshape({2, 4, 9}), sy::zeros({4}, D()),
                                       sy::ones({4}, D()), Tensor(), Tensor(), true));
  Tensor table = sy::randn({5, 3}, D()).requires_grad_();
  loss = loss +
         sy::sum(sy::embedding(sy::from_vector(std::vector<int32_t>{4, 0, 4}, {3}, D()), table));
  loss.backward();
  sy::optim::Adam({x}, 0.1f).step();         // one parameter: adam_update
  sy::optim::Adam({table, w}, 0.1f).step();  // several: adam_multi where the device has it
  sy::optim::SGD({w}, {.lr = 0.1f, .momentum = 0.5f}).step();
  sy::optim::SGD({table, w}, {.lr = 0.1f, .momentum = 0.5f}).step();  // several: sgd_multi
  sy::optim::SGD({b}, {.lr = 0.1f}).step();
  sy::eval({loss, sy::argmax(y), sy::zeros({2}, D()),
            sy::from_vector(std::vector<float>{1}, {1}, D()).to(sy::DType::i32), sy::eq(y, y)});
  sy::synchronize(d);
  auto after = d.counters();
  for (size_t k = 0; k < size_t(sy::kNumKernels); ++k) {
    if (sy::kernel_has(sy::Kernel(k), sy::kUserKernel)) continue;  // tests/test_custom.cpp
    if (!d.supports(sy::Kernel(k))) {  // a multi-tensor kernel left to its per-tensor one
      EXPECT_TRUE(sy::kernel_has(sy::Kernel(k), sy::kMultiTensor))
          << sy::kernel_name(sy::Kernel(k));
      EXPECT_EQ(after.launches_by_kernel[k], before.launches_by_kernel[k]);
      continue;
    }
    EXPECT_GT(after.launches_by_kernel[k], before.launches_by_kernel[k])
        << "kernel " << sy::kernel_name(sy::Kernel(k)) << " was never launched";
    EXPECT_TRUE(d.supports(sy::Kernel(k))) << sy::kernel_name(sy::Kernel(k));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, OnDevice, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& i) { return device_param_name(i.param); });
