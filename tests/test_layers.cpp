// SPDX-License-Identifier: MIT
// Layers beyond the MLP: convolution against a direct convolution in double,
// pooling (shapes, ties, NaN), batch norm's training and evaluation
// behaviour and running statistics, bmm, cat, transpose of any two dims,
// softmax along any dim, and embedding. Their gradients are in
// test_grad.cpp, their kernels in the conformance suite, a CNN against
// PyTorch in test_serialize.cpp (TorchInterop).
#include <cmath>
#include <limits>

#include "helpers.h"

using sy::Tensor;

namespace {

// Direct convolution in double, as the definition reads.
std::vector<double> conv_ref(const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& b, int64_t N, int64_t C, int64_t H,
                             int64_t W, int64_t OC, int64_t K0, int64_t K1, sy::Size2 s,
                             sy::Size2 p, sy::Size2 dl, int64_t G, int64_t& OH, int64_t& OW) {
  OH = (H + 2 * p.h - dl.h * (K0 - 1) - 1) / s.h + 1;
  OW = (W + 2 * p.w - dl.w * (K1 - 1) - 1) / s.w + 1;
  const int64_t Cg = C / G, OCg = OC / G;
  std::vector<double> y(size_t(N * OC * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double acc = b.empty() ? 0.0 : b[size_t(o)];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < K0; ++kh)
              for (int64_t kw = 0; kw < K1; ++kw) {
                int64_t ih = i * s.h - p.h + kh * dl.h, iw = j * s.w - p.w + kw * dl.w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t ci = o / OCg * Cg + c;
                acc += double(x[size_t(((n * C + ci) * H + ih) * W + iw)]) *
                       double(w[size_t(((o * Cg + c) * K0 + kh) * K1 + kw)]);
              }
          y[size_t(((n * OC + o) * OH + i) * OW + j)] = acc;
        }
  return y;
}

}  // namespace

// Restores the process's conv2d lowering when a test that switches it ends.
struct AlgorithmGuard {
  sy::ConvAlgorithm was = sy::conv_algorithm();
  ~AlgorithmGuard() { sy::set_conv_algorithm(was); }
};

TEST_P(OnDevice, Conv2dMatchesDirectConvolution) {
  struct Case {
    int64_t N, C, H, W, OC, K0, K1;
    sy::Size2 s, p, dl;
    int64_t G;
    bool bias;
  };
  // Both lowerings (ops.h's ConvAlgorithm).
  AlgorithmGuard guard;
  for (sy::ConvAlgorithm alg : {sy::ConvAlgorithm::im2col, sy::ConvAlgorithm::implicit_gemm}) {
    sy::set_conv_algorithm(alg);
    // Below, at and above the GEMM tiles (64), odd sizes, every option.
    for (const Case& c : std::vector<Case>{{2, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, true},
                                           {3, 16, 14, 14, 64, 3, 3, 1, 1, 1, 1, false},
                                           {2, 5, 13, 11, 70, 3, 2, {2, 1}, {0, 1}, 1, 1, true},
                                           {1, 4, 10, 12, 6, 3, 3, 2, 2, {2, 1}, 2, true},
                                           {4, 6, 9, 9, 6, 1, 1, 1, 0, 1, 6, true},
                                           {1, 1, 28, 28, 32, 5, 5, 1, 2, 1, 1, false},
                                           // a large batch of many channels, 5x5, padded
                                           {150, 64, 12, 12, 4, 5, 5, 1, 2, 1, 1, true}}) {
      SCOPED_TRACE(testing::Message() << "C=" << c.C << " OC=" << c.OC << " G=" << c.G);
      auto xv = random_vec(size_t(c.N * c.C * c.H * c.W), 51);
      auto wv = random_vec(size_t(c.OC * c.C / c.G * c.K0 * c.K1), 52);
      auto bv = c.bias ? random_vec(size_t(c.OC), 53) : std::vector<float>{};
      int64_t OH, OW;
      auto ref =
          conv_ref(xv, wv, bv, c.N, c.C, c.H, c.W, c.OC, c.K0, c.K1, c.s, c.p, c.dl, c.G, OH, OW);
      Tensor x = sy::from_vector(xv, {c.N, c.C, c.H, c.W}, D());
      Tensor w = sy::from_vector(wv, {c.OC, c.C / c.G, c.K0, c.K1}, D());
      Tensor b = c.bias ? sy::from_vector(bv, {c.OC}, D()) : Tensor();
      Tensor y = sy::conv2d(x, w, b, c.s, c.p, c.dl, c.G);
      ASSERT_EQ(y.shape(), (sy::Shape{c.N, c.OC, OH, OW}));
      EXPECT_LT(nse(y.to_vector<float>(), ref), 1e-10);
    }
  }
  Tensor x = sy::zeros({2, 4, 5, 5}, D());
  expect_error(
      [&] {
        sy::conv2d(x, sy::zeros({3, 3, 3, 3}, D()));
      },
      {"conv2d", "expected weight of shape (3, 4, kH, kW)", "found (3,3,3,3)"});
  expect_error(
      [&] {
        sy::conv2d(x, sy::zeros({3, 2, 3, 3}, D()), Tensor(), 1, 0, 1, 3);
      },
      {"conv2d", "divisible by groups (3)"});
  expect_error(
      [&] {
        sy::conv2d(x, sy::zeros({3, 4, 7, 7}, D()));
      },
      {"conv2d", "to fit the padded input (5x5)"});
  expect_error(
      [&] {
        sy::conv2d(sy::zeros({4, 5, 5}, D()), sy::zeros({3, 4, 3, 3}, D()));
      },
      {"conv2d", "expected input of shape (N, C, H, W), found (4,5,5)"});
  expect_error(
      [&] {
        sy::conv2d(x, sy::zeros({3, 4, 3, 3}, D()), sy::zeros({4}, D()));
      },
      {"conv2d", "expected bias of shape (3), found (4)"});
  expect_error(
      [&] {
        sy::conv2d(x, sy::zeros({3, 4, 3, 3}, D()), Tensor(), 0);
      },
      {"conv2d", "expected stride >= 1"});
}

// The weight and input gradients against their definitions in double: a
// batch whose weight gradient is 4 partial sums (N*OH*OW = 4096), and a
// large batch of many channels (150 samples of 64 channels: 22 sums).
TEST_P(OnDevice, Conv2dGradientsMatchTheDirectFormula) {
  struct Case {
    int64_t N, C, H, OC, K, p;
  };
  AlgorithmGuard guard;
  for (sy::ConvAlgorithm alg : {sy::ConvAlgorithm::im2col, sy::ConvAlgorithm::implicit_gemm}) {
    sy::set_conv_algorithm(alg);
    for (const Case& c : {Case{4, 3, 32, 8, 3, 1}, Case{150, 64, 12, 4, 5, 2}}) {
      SCOPED_TRACE(testing::Message() << "N=" << c.N << " C=" << c.C);
      const int64_t H = c.H, O = H + 2 * c.p - c.K + 1;
      auto xv = random_vec(size_t(c.N * c.C * H * H), 81);
      auto wv = random_vec(size_t(c.OC * c.C * c.K * c.K), 82);
      auto gv = random_vec(size_t(c.N * c.OC * O * O), 83);
      Tensor x = sy::from_vector(xv, {c.N, c.C, H, H}, D()).requires_grad_();
      Tensor w = sy::from_vector(wv, {c.OC, c.C, c.K, c.K}, D()).requires_grad_();
      sy::sum(sy::conv2d(x, w, Tensor(), 1, c.p) * sy::from_vector(gv, {c.N, c.OC, O, O}, D()))
          .backward();
      std::vector<double> dw(wv.size(), 0.0), dx(xv.size(), 0.0);
      for (int64_t n = 0; n < c.N; ++n)
        for (int64_t o = 0; o < c.OC; ++o)
          for (int64_t i = 0; i < O; ++i)
            for (int64_t j = 0; j < O; ++j) {
              const double g = gv[size_t(((n * c.OC + o) * O + i) * O + j)];
              for (int64_t ci = 0; ci < c.C; ++ci)
                for (int64_t kh = 0; kh < c.K; ++kh)
                  for (int64_t kw = 0; kw < c.K; ++kw) {
                    const int64_t ih = i - c.p + kh, iw = j - c.p + kw;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= H) continue;
                    const size_t xi = size_t(((n * c.C + ci) * H + ih) * H + iw);
                    const size_t wi = size_t(((o * c.C + ci) * c.K + kh) * c.K + kw);
                    dw[wi] += g * xv[xi];
                    dx[xi] += g * wv[wi];
                  }
            }
      EXPECT_LT(nse(w.grad().to_vector<float>(), dw), 1e-10);
      EXPECT_LT(nse(x.grad().to_vector<float>(), dx), 1e-10);
    }
  }
}

TEST_P(OnDevice, PoolingShapesTiesAndErrors) {
  // Ties: the gradient goes to the first maximum of each window, as PyTorch.
  Tensor x = sy::from_vector(std::vector<float>{1, 3, 3, 0, 2, 3, 3, 1, 0, 0, 5, 5, 0, 0, 5, 5},
                             {1, 1, 4, 4}, D())
                 .requires_grad_();
  Tensor y = sy::max_pool2d(x, 2);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 3, 0, 5}));
  sy::sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(),
            (std::vector<float>{0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0}));
  // 3-D input, a stride other than the kernel, padding.
  Tensor z = sy::rand({3, 9, 7}, D());
  EXPECT_EQ(sy::max_pool2d(z, 3, 2, 1).shape(), (sy::Shape{3, 5, 4}));
  EXPECT_EQ(sy::avg_pool2d(z, {3, 2}, {1, 2}).shape(), (sy::Shape{3, 7, 3}));
  Tensor g = sy::adaptive_avg_pool2d(
      sy::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {1, 1, 2, 3}, D()));
  EXPECT_EQ(g.shape(), (sy::Shape{1, 1, 1, 1}));
  EXPECT_FLOAT_EQ(g.item(), 3.5f);
  EXPECT_EQ(sy::adaptive_avg_pool2d(sy::rand({2, 3, 8, 6}, D()), {4, 3}).shape(),
            (sy::Shape{2, 3, 4, 3}));
  // Padding counts in the divisor by default, as PyTorch's count_include_pad.
  Tensor ones = sy::ones({1, 1, 2, 2}, D());
  EXPECT_EQ(sy::avg_pool2d(ones, 2, 1, 1).to_vector<float>()[0], 0.25f);
  EXPECT_EQ(sy::avg_pool2d(ones, 2, 1, 1, false).to_vector<float>()[0], 1.f);
  expect_error([&] { sy::max_pool2d(z, 2, 2, 2); },
               {"max_pool2d", "padding between 0 and half the kernel size"});
  expect_error(
      [&] {
        sy::max_pool2d(sy::zeros({5, 5}, D()), 2);
      },
      {"max_pool2d", "expected input of shape (N, C, H, W) or (C, H, W), found (5,5)"});
  expect_error([&] { sy::adaptive_avg_pool2d(z, 4); }, {"adaptive_avg_pool2d", "divide the input"});
}

TEST_P(OnDevice, BatchNormTrainsOnTheBatchAndEvaluatesOnRunningStatistics) {
  const int64_t N = 4, C = 3, HW = 10;
  auto v = random_vec(size_t(N * C * HW), 61, -2.f, 3.f);
  Tensor x = sy::from_vector(v, {N, C, 2, 5}, D());
  sy::nn::BatchNorm2d bn(C, 1e-5f, 0.1f, true, D());
  EXPECT_EQ(names_of(bn.state_dict()),
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                      "num_batches_tracked"}));
  EXPECT_EQ(bn.parameters().size(), 2u);  // buffers are not trained
  std::vector<double> mu(C, 0), var(C, 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < HW; ++k) mu[size_t(c)] += v[size_t((n * C + c) * HW + k)] / (N * HW);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < HW; ++k)
        var[size_t(c)] += std::pow(v[size_t((n * C + c) * HW + k)] - mu[size_t(c)], 2) / (N * HW);
  auto y = bn(x).to_vector<float>();
  std::vector<double> ref(y.size()), rm(C), rv(C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < HW; ++k) {
        size_t i = size_t((n * C + c) * HW + k);
        ref[i] = (v[i] - mu[size_t(c)]) / std::sqrt(var[size_t(c)] + 1e-5);
      }
  EXPECT_LT(nse(y, ref), 1e-10);
  const double unbiased = double(N * HW) / double(N * HW - 1);
  for (int64_t c = 0; c < C; ++c) {
    rm[size_t(c)] = 0.1 * mu[size_t(c)];
    rv[size_t(c)] = 0.9 + 0.1 * var[size_t(c)] * unbiased;
  }
  EXPECT_LT(nse(bn.running_mean().to_vector<float>(), rm), 1e-10);
  EXPECT_LT(nse(bn.running_var().to_vector<float>(), rv), 1e-10);
  EXPECT_EQ(bn.state_dict()[4].second.to_vector<int64_t>(), std::vector<int64_t>{1});
  bn(x);
  EXPECT_EQ(bn.state_dict()[4].second.to_vector<int64_t>(), std::vector<int64_t>{2});
  // Evaluation: the running statistics, which stay as they are.
  bn.eval();
  auto rmv = bn.running_mean().to_vector<float>(), rvv = bn.running_var().to_vector<float>();
  auto ye = bn(x).to_vector<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < HW; ++k) {
        size_t i = size_t((n * C + c) * HW + k);
        ref[i] = (v[i] - rmv[size_t(c)]) / std::sqrt(double(rvv[size_t(c)]) + 1e-5);
      }
  EXPECT_LT(nse(ye, ref), 1e-10);
  EXPECT_EQ(bn.running_mean().to_vector<float>(), rmv);
  EXPECT_EQ(bn.state_dict()[4].second.to_vector<int64_t>(), std::vector<int64_t>{2});
  // BatchNorm1d over (N, C) and (N, C, L); shapes are checked.
  sy::nn::BatchNorm1d bn1(5, 1e-5f, 0.1f, true, D());
  EXPECT_EQ(bn1(sy::randn({6, 5}, D())).shape(), (sy::Shape{6, 5}));
  EXPECT_EQ(bn1(sy::randn({6, 5, 3}, D())).shape(), (sy::Shape{6, 5, 3}));
  expect_error([&] { bn1(sy::randn({6, 4}, D())); }, {"BatchNorm1d", "(N, 5) or (N, 5, L)"});
  expect_error([&] { bn(sy::randn({2, 3, 4}, D())); }, {"BatchNorm2d", "(N, 3, H, W)"});
  bn1.train();
  expect_error(
      [&] {
        bn1(sy::randn({1, 5}, D()));
      },
      {"batch_norm", "more than one value per channel"});
}

// ---- optimizers ----------------------------------------------------------------

// The optimizers' fused kernels against PyTorch's update formulas.
TEST_P(OnDevice, OptimSgdAndAdamMatchReferenceFormulas) {
  auto p0 = random_vec(7, 18), g0 = random_vec(7, 19);
  auto run = [&](auto make_opt, auto ref_step) {
    Tensor p = sy::from_vector(p0, {7}, D()).requires_grad_();
    auto opt = make_opt(std::vector<Tensor>{p});
    std::vector<double> rp(p0.begin(), p0.end()), s1(7, 0.0), s2(7, 0.0);
    for (int t = 1; t <= 3; ++t) {
      p.set_grad(sy::from_vector(g0, {7}, D()) * float(t));
      opt.step();
      ref_step(rp, s1, s2, t);
    }
    EXPECT_LT(nse(p.to_vector<float>(), rp), 1e-11);
  };
  run(
      [](std::vector<Tensor> ps) {
        return sy::optim::SGD(ps, {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f});
      },
      [&](std::vector<double>& p, std::vector<double>& buf, std::vector<double>&, int t) {
        for (size_t i = 0; i < p.size(); ++i) {
          double g = g0[i] * t + 0.01 * p[i];
          buf[i] = t == 1 ? g : 0.9 * buf[i] + g;
          p[i] -= 0.1 * buf[i];
        }
      });
  run([](std::vector<Tensor> ps) { return sy::optim::SGD(ps, 0.1f); },
      [&](std::vector<double>& p, std::vector<double>&, std::vector<double>&, int t) {
        for (size_t i = 0; i < p.size(); ++i) p[i] -= 0.1 * g0[i] * t;
      });
  for (bool decoupled : {false, true}) {
    sy::optim::AdamOptions o{.lr = 0.01f, .weight_decay = 0.1f, .decoupled = decoupled};
    run([&](std::vector<Tensor> ps) { return sy::optim::Adam(ps, o); },
        [&](std::vector<double>& p, std::vector<double>& m, std::vector<double>& v, int t) {
          for (size_t i = 0; i < p.size(); ++i) {
            double g = g0[i] * t;
            if (decoupled)
              p[i] *= 1 - 0.01 * 0.1;
            else
              g += 0.1 * p[i];
            m[i] = 0.9 * m[i] + 0.1 * g;
            v[i] = 0.999 * v[i] + 0.001 * g * g;
            double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.999, t));
            p[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
          }
        });
  }
}

// Parameters of these sizes on d, the same values every call.
static std::vector<Tensor> leaf_params(const std::vector<int64_t>& sizes, sy::Device& d) {
  std::vector<Tensor> ps;
  for (size_t k = 0; k < sizes.size(); ++k)
    ps.push_back(sy::from_vector(random_vec(size_t(sizes[k]), uint32_t(20 + k)), {sizes[k]}, d)
                     .requires_grad_());
  return ps;
}
// Step t's gradients, the same on both lists of parameters; parameter
// `none` gets none.
static void set_same_grads(std::vector<Tensor>& a, std::vector<Tensor>& b, int t, int none) {
  for (size_t k = 0; k < a.size(); ++k) {
    if (int(k) == none) {
      a[k].zero_grad(), b[k].zero_grad();
      continue;
    }
    const int64_t n = a[k].numel();
    auto g = random_vec(size_t(n), uint32_t(100 * t + int(k)));
    a[k].set_grad(sy::from_vector(g, {n}, a[k].device()));
    b[k].set_grad(sy::from_vector(g, {n}, b[k].device()));
  }
}
// Two optimizers' state dicts: the same names and values.
static void expect_same_optimizer_state(const sy::NamedTensors& a, const sy::NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>()) << a[i].first;
  }
}
// Launches of a kernel on `d` since `before` (after its work is done).
static auto launches_since(sy::BackendDevice& d, const sy::Counters& before) {
  sy::synchronize(d);
  return [after = d.counters(), before](sy::Kernel k) {
    return after.launches_by_kernel[size_t(k)] - before.launches_by_kernel[size_t(k)];
  };
}

// Adam over several parameters: one adam_multi launch a step where the
// device has the kernel, the same values as one launch per parameter, also
// when a parameter has no gradient at a step (its count stays behind).
TEST_P(OnDevice, OptimAdamForeachMatchesOneLaunchPerParameter) {
  sy::BackendDevice& d = D();
  const std::vector<int64_t> sizes = {7, 5000, 3};
  auto make = [&] { return leaf_params(sizes, d); };
  auto a = make(), b = make();
  for (bool decoupled : {false, true}) {
    sy::optim::Adam one(a, {.lr = 0.01f, .weight_decay = 0.1f, .decoupled = decoupled});
    sy::optim::Adam each(
        b, {.lr = 0.01f, .weight_decay = 0.1f, .decoupled = decoupled, .foreach = false});
    const auto before = d.counters();
    for (int t = 1; t <= 4; ++t) {
      set_same_grads(a, b, t, t == 2 ? 2 : -1);  // parameter 2: no gradient this step
      one.step();
      each.step();
    }
    for (size_t k = 0; k < sizes.size(); ++k)
      EXPECT_EQ(a[k].to_vector<float>(), b[k].to_vector<float>()) << "parameter " << k;
    const auto sa = one.state_dict();
    expect_same_optimizer_state(sa, each.state_dict());
    EXPECT_EQ(sa.back().second.to_vector<float>(), std::vector<float>{3.f}) << "skipped once";
    auto launches = launches_since(d, before);
    const bool multi = d.supports(sy::Kernel::adam_multi);
    EXPECT_EQ(launches(sy::Kernel::adam_multi), multi ? 4u : 0u);
    EXPECT_EQ(launches(sy::Kernel::adam_update), multi ? 11u : 22u);  // 3 + 2 + 3 + 3 each
  }
}

// SGD over several parameters: one sgd_multi launch a step where the device
// has the kernel, the same values as one launch per parameter: plain, with
// momentum, with Nesterov. A parameter without a gradient at the first step
// has no momentum buffer at the second, when the others have theirs: that
// step runs one launch per parameter (the launch's first_step is one flag).
TEST_P(OnDevice, OptimSgdForeachMatchesOneLaunchPerParameter) {
  sy::BackendDevice& d = D();
  const std::vector<int64_t> sizes = {7, 5000, 3};
  auto make = [&] { return leaf_params(sizes, d); };
  for (int variant = 0; variant < 3; ++variant) {  // plain, momentum, nesterov
    SCOPED_TRACE(variant);
    auto a = make(), b = make();
    sy::optim::SGDOptions o{.lr = 0.05f, .weight_decay = 0.1f};
    if (variant > 0) o.momentum = 0.9f, o.dampening = variant == 1 ? 0.2f : 0.f;
    o.nesterov = variant == 2;
    sy::optim::SGD one(a, o);
    o.foreach = false;
    sy::optim::SGD each(b, o);
    const auto before = d.counters();
    for (int t = 1; t <= 4; ++t) {
      set_same_grads(a, b, t, t == 1 ? 2 : -1);  // parameter 2: no gradient at the first
      one.step();
      each.step();
    }
    for (size_t k = 0; k < sizes.size(); ++k)
      EXPECT_EQ(a[k].to_vector<float>(), b[k].to_vector<float>()) << "parameter " << k;
    EXPECT_EQ(one.state_dict().size(), variant ? sizes.size() : 0u);
    expect_same_optimizer_state(one.state_dict(), each.state_dict());
    auto launches = launches_since(d, before);
    const bool multi = d.supports(sy::Kernel::sgd_multi);
    const sy::Kernel single = variant ? sy::Kernel::sgd_momentum_update : sy::Kernel::sgd_update;
    // Plain: every step one launch; momentum: the second step per parameter.
    EXPECT_EQ(launches(sy::Kernel::sgd_multi), !multi ? 0u : variant ? 3u : 4u);
    EXPECT_EQ(launches(single), !multi ? 22u : variant ? 14u : 11u);  // 2 + 3 + 3 + 3 each
  }
}

// ---- batch norm and ReLU -----------------------------------------------------------

// A Sequential's BatchNorm then ReLU run fused (one normalization launch
// with the ReLU, its mask in batch norm's backward kernels): the values,
// gradients and running statistics of the two modules run apart, in both
// modes, with fewer launches.
// Two models run fused and apart hold the same state: the same names, i64
// buffers equal, floats and their gradients within rounding.
static void expect_same_state(const sy::nn::Module& fused, const sy::nn::Module& apart) {
  auto close = [](const Tensor& a, const Tensor& b) {
    auto r = b.to_vector<float>();
    return nse(a.to_vector<float>(), std::vector<double>(r.begin(), r.end()));
  };
  const auto s1 = fused.state_dict(), s2 = apart.state_dict();
  ASSERT_EQ(s1.size(), s2.size());
  for (size_t i = 0; i < s1.size(); ++i) {
    EXPECT_EQ(s1[i].first, s2[i].first);
    if (s1[i].second.dtype() == sy::DType::i64) {
      EXPECT_EQ(s1[i].second.to_vector<int64_t>(), s2[i].second.to_vector<int64_t>());
    } else {
      EXPECT_LT(close(s1[i].second, s2[i].second), 1e-12) << s1[i].first;
    }
    if (s1[i].second.requires_grad()) {
      EXPECT_LT(close(s1[i].second.grad(), s2[i].second.grad()), 1e-10) << s1[i].first;
    }
  }
}

TEST_P(OnDevice, BatchNormThenReluInASequentialRunsFusedWithTheSameResults) {
  auto close = [](const Tensor& a, const Tensor& b) {
    auto r = b.to_vector<float>();
    return nse(a.to_vector<float>(), std::vector<double>(r.begin(), r.end()));
  };
  auto v = random_vec(size_t(4 * 3 * 10), 62, -2.f, 3.f);
  auto gv = random_vec(v.size(), 63);
  auto model = [&] {
    auto m = std::make_shared<sy::nn::Sequential>();
    m->add(std::make_shared<sy::nn::BatchNorm2d>(3, 1e-5f, 0.1f, true, D()));
    m->add(std::make_shared<sy::nn::ReLU>());
    return m;
  };
  auto fused = model(), apart = model();
  for (bool training : {true, false}) {
    fused->train(training), apart->train(training);
    Tensor x1 = sy::from_vector(v, {4, 3, 2, 5}, D()).requires_grad_();
    Tensor x2 = sy::from_vector(v, {4, 3, 2, 5}, D()).requires_grad_();
    const auto before = D().counters();
    Tensor y1 = fused->forward(x1);
    sy::sum(y1 * sy::from_vector(gv, {4, 3, 2, 5}, D())).backward();
    sy::eval({y1, x1.grad()});
    const auto mid = D().counters();
    Tensor y2 = sy::relu((*apart)[0].forward(x2));  // the two modules, one after the other
    sy::sum(y2 * sy::from_vector(gv, {4, 3, 2, 5}, D())).backward();
    sy::eval({y2, x2.grad()});
    const auto after = D().counters();
    // The ReLU's own kernels run only apart.
    for (sy::Kernel k : {sy::Kernel::unary, sy::Kernel::unary_backward}) {
      const size_t i = size_t(k);
      EXPECT_EQ(mid.launches_by_kernel[i] - before.launches_by_kernel[i], 0u);
      EXPECT_EQ(after.launches_by_kernel[i] - mid.launches_by_kernel[i], 1u);
    }
    EXPECT_LT(close(y1, y2), 1e-12);
    EXPECT_LT(close(x1.grad(), x2.grad()), 1e-10);
    expect_same_state(*fused, *apart);
  }
}

// BatchNorm2d, a ReLU (or none) and a 2x2 max pooling in a Sequential run
// as one (the pooling reads the normalized values; the backward reads the
// pooling's gradient, maxima and indices in place of a full-size gradient
// and mask): values, gradients and running statistics as the modules run
// one after another, in training and evaluation, on planes whose sides the
// window does not divide.
TEST_P(OnDevice, BatchNormReluMaxPoolInASequentialRunsFusedWithTheSameResults) {
  auto close = [](const Tensor& a, const Tensor& b) {
    auto r = b.to_vector<float>();
    return nse(a.to_vector<float>(), std::vector<double>(r.begin(), r.end()));
  };
  const sy::Shape xs{4, 3, 7, 6}, ys{4, 3, 3, 3};
  auto v = random_vec(size_t(4 * 3 * 7 * 6), 64, -2.f, 3.f);
  auto gv = random_vec(size_t(4 * 3 * 3 * 3), 65);
  for (bool relu : {true, false}) {
    auto model = [&] {
      auto m = std::make_shared<sy::nn::Sequential>();
      m->add(std::make_shared<sy::nn::BatchNorm2d>(3, 1e-5f, 0.1f, true, D()));
      if (relu) m->add(std::make_shared<sy::nn::ReLU>());
      m->add(std::make_shared<sy::nn::MaxPool2d>(2));
      return m;
    };
    auto fused = model(), apart = model();
    for (bool training : {true, false}) {
      fused->train(training), apart->train(training);
      Tensor x1 = sy::from_vector(v, xs, D()).requires_grad_();
      Tensor x2 = sy::from_vector(v, xs, D()).requires_grad_();
      const auto before = D().counters();
      Tensor y1 = fused->forward(x1);
      sy::sum(y1 * sy::from_vector(gv, ys, D())).backward();
      sy::eval({y1, x1.grad()});
      const auto mid = D().counters();
      Tensor y2 = (*apart)[0].forward(x2);  // the modules, one after another
      if (relu) y2 = sy::relu(y2);
      y2 = sy::max_pool2d(y2, 2);
      sy::sum(y2 * sy::from_vector(gv, ys, D())).backward();
      sy::eval({y2, x2.grad()});
      const auto after = D().counters();
      const size_t pb = size_t(sy::Kernel::max_pool2d_backward);
      EXPECT_EQ(mid.launches_by_kernel[pb] - before.launches_by_kernel[pb], 0u);
      EXPECT_EQ(after.launches_by_kernel[pb] - mid.launches_by_kernel[pb], 1u);
      ASSERT_EQ(y1.shape(), ys);
      EXPECT_LT(close(y1, y2), 1e-12) << "relu " << relu << " training " << training;
      EXPECT_LT(close(x1.grad(), x2.grad()), 1e-10) << "relu " << relu << " training " << training;
      expect_same_state(*fused, *apart);
    }
    // A plane smaller than the window: the pooling's error, and the batch
    // norm's running statistics and count unchanged (checked before queueing).
    fused->train(true);
    auto& bn = static_cast<sy::nn::BatchNorm&>((*fused)[0]);
    const auto rm = bn.running_mean().to_vector<float>();
    auto counted = [&] {
      for (const auto& [name, t] : fused->state_dict())
        if (name.find("num_batches_tracked") != std::string::npos) return t.to_vector<int64_t>();
      return std::vector<int64_t>{};
    };
    const auto count = counted();
    ASSERT_EQ(count.size(), 1u);
    expect_error(
        [&] {
          (void)fused->forward(sy::ones({2, 3, 1, 1}, D()));
        },
        {"max_pool2d", "expected the window (2x2) to fit the padded input"});
    EXPECT_EQ(bn.running_mean().to_vector<float>(), rm);
    EXPECT_EQ(counted(), count);
  }
}

// A Linear followed by a ReLU in a Sequential runs as one GEMM with the ReLU
// in its epilogue (no unary launch): values and gradients as apart,
// including the gradient's 0 where the pre-activation is 0 or negative.
TEST_P(OnDevice, LinearThenReluInASequentialRunsFusedWithTheSameResults) {
  auto close = [](const Tensor& a, const Tensor& b) {
    auto r = b.to_vector<float>();
    return nse(a.to_vector<float>(), std::vector<double>(r.begin(), r.end()));
  };
  sy::manual_seed(5);
  auto fused = std::make_shared<sy::nn::Sequential>();
  fused->add(std::make_shared<sy::nn::Linear>(7, 5, true, D()));
  fused->add(std::make_shared<sy::nn::ReLU>());
  auto& lin = static_cast<sy::nn::Linear&>((*fused)[0]);
  auto v = random_vec(size_t(6 * 7), 66, -2.f, 2.f), gv = random_vec(size_t(6 * 5), 67);
  Tensor x1 = sy::from_vector(v, {6, 7}, D()).requires_grad_();
  Tensor x2 = sy::from_vector(v, {6, 7}, D()).requires_grad_();
  const auto before = D().counters();
  Tensor y1 = fused->forward(x1);
  sy::sum(y1 * sy::from_vector(gv, {6, 5}, D())).backward();
  sy::eval({y1, x1.grad()});
  const auto mid = D().counters();
  const Tensor w1 = lin.weight().grad(), b1 = lin.bias().grad();
  lin.weight().zero_grad(), lin.bias().zero_grad();
  Tensor y2 = sy::relu(sy::linear(x2, lin.weight(), lin.bias()));
  sy::sum(y2 * sy::from_vector(gv, {6, 5}, D())).backward();
  sy::eval({y2, x2.grad()});
  const size_t u = size_t(sy::Kernel::unary);
  EXPECT_EQ(mid.launches_by_kernel[u] - before.launches_by_kernel[u], 0u);
  EXPECT_EQ(D().counters().launches_by_kernel[u] - mid.launches_by_kernel[u], 1u);
  EXPECT_LT(close(y1, y2), 1e-12);
  EXPECT_LT(close(x1.grad(), x2.grad()), 1e-10);
  EXPECT_LT(close(w1, lin.weight().grad()), 1e-10);
  EXPECT_LT(close(b1, lin.bias().grad()), 1e-10);
}

TEST_P(OnDevice, CatJoinsAlongTheFirstDimensionWithItsGradient) {
  Tensor a = sy::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}, D()).requires_grad_();
  Tensor b = sy::from_vector(std::vector<float>{5, 6}, {1, 2}, D()).requires_grad_();
  Tensor c = sy::cat({a, b, a});
  EXPECT_EQ(c.shape(), (sy::Shape{5, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4}));
  sy::sum(c * sy::arange(10, D()).reshape({5, 2})).backward();
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{6, 8, 10, 12}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{4, 5}));
  expect_error(
      [&] {
        sy::cat({a, sy::zeros({2, 3}, D())});
      },
      {"cat", "expected tensors of shape (*,2), found (2,3)"});
  expect_error([&] { sy::cat({a, b}, 1); }, {"cat", "only dim 0 is supported"});
  expect_error([&] { sy::cat({}); }, {"cat", "at least one tensor"});
}

TEST_P(OnDevice, MaxPoolPropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = sy::from_vector(std::vector<float>{1, nan, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4}, D())
                 .requires_grad_();
  Tensor y = sy::max_pool2d(x, 2);
  auto v = y.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 8.f);
  // Several NaNs in a window: the last one wins, as in PyTorch.
  Tensor z =
      sy::from_vector(std::vector<float>{nan, 1, nan, 2}, {1, 1, 2, 2}, D()).requires_grad_();
  sy::sum(sy::max_pool2d(z, 2)).backward();
  auto gz = z.grad().to_vector<float>();
  EXPECT_EQ(gz[2], 1.f);
  EXPECT_EQ(gz[0] + gz[1] + gz[3], 0.f);
}

TEST_P(OnDevice, BmmAndMatmulOfStacks) {
  const int64_t B = 3, M = 5, K = 70, N = 4;
  auto av = random_vec(size_t(B * M * K), 71), bv = random_vec(size_t(B * K * N), 72);
  std::vector<double> ref(size_t(B * M * N), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          ref[size_t((b * M + m) * N + n)] +=
              double(av[size_t((b * M + m) * K + k)]) * bv[size_t((b * K + k) * N + n)];
  Tensor a = sy::from_vector(av, {B, M, K}, D()), b = sy::from_vector(bv, {B, K, N}, D());
  EXPECT_LT(nse(sy::bmm(a, b).to_vector<float>(), ref), 1e-10);
  Tensor y4 = sy::matmul(a.reshape({1, B, M, K}), b.reshape({1, B, K, N}));
  EXPECT_EQ(y4.shape(), (sy::Shape{1, B, M, N}));
  EXPECT_LT(nse(y4.to_vector<float>(), ref), 1e-10);
  // Empty stacks: an empty result, nothing run.
  EXPECT_EQ(sy::bmm(sy::zeros({0, 3, 4}, D()), sy::zeros({0, 4, 5}, D())).shape(),
            (sy::Shape{0, 3, 5}));
  EXPECT_EQ(sy::matmul(sy::zeros({2, 0, 4}, D()), sy::zeros({2, 4, 5}, D())).shape(),
            (sy::Shape{2, 0, 5}));
  expect_error([&] { sy::bmm(a, sy::zeros({2, K, N}, D())); }, {"bmm", "the same batch size"});
  expect_error([&] { sy::bmm(a, sy::zeros({B, 3, N}, D())); }, {"bmm", "inner dims 70 != 3"});
  expect_error(
      [&] {
        sy::matmul(a, sy::zeros({1, K, N}, D()));
      },
      {"matmul", "the same leading dimensions"});
}

TEST_P(OnDevice, TransposeAnyTwoDimsAndSoftmaxAlongAnyDim) {
  const sy::Shape shape{2, 3, 4, 5};
  auto v = random_vec(120, 81, -3.f, 3.f);
  auto at = [&](const std::vector<int64_t>& i) {  // element i of v, of `shape`
    return v[size_t(((i[0] * 3 + i[1]) * 4 + i[2]) * 5 + i[3])];
  };
  Tensor x = sy::from_vector(v, shape, D());
  for (auto [d0, d1] : {std::pair{0, 1}, {1, 2}, {0, 3}, {3, 1}, {-1, -2}, {2, 2}}) {
    SCOPED_TRACE(std::to_string(d0) + "," + std::to_string(d1));
    Tensor y = sy::transpose(x, d0, d1);
    const int64_t a = (d0 + 4) % 4, b = (d1 + 4) % 4;
    sy::Shape ys = shape;
    std::swap(ys[size_t(a)], ys[size_t(b)]);
    ASSERT_EQ(y.shape(), ys);
    auto got = y.to_vector<float>();
    size_t k = 0;
    std::vector<int64_t> o(4);
    for (o[0] = 0; o[0] < ys[0]; ++o[0])
      for (o[1] = 0; o[1] < ys[1]; ++o[1])
        for (o[2] = 0; o[2] < ys[2]; ++o[2])
          for (o[3] = 0; o[3] < ys[3]; ++o[3]) {
            std::vector<int64_t> i = o;
            std::swap(i[size_t(a)], i[size_t(b)]);
            ASSERT_EQ(got[k++], at(i)) << k;
          }
  }
  // An i32 tensor moves as its bits; 1-sized dims between count as neighbours.
  Tensor ints = sy::arange(6, sy::Options().device(D()).dtype(sy::DType::i32)).reshape({2, 1, 3});
  EXPECT_EQ(sy::transpose(ints, 0, 2).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
  // softmax and log_softmax along each dim, against double.
  for (int64_t dim = 0; dim < 4; ++dim) {
    SCOPED_TRACE(dim);
    std::vector<double> ref(120), lref(120);
    std::vector<int64_t> i(4);
    for (i[0] = 0; i[0] < 2; ++i[0])
      for (i[1] = 0; i[1] < 3; ++i[1])
        for (i[2] = 0; i[2] < 4; ++i[2])
          for (i[3] = 0; i[3] < 5; ++i[3]) {
            std::vector<int64_t> j = i;
            double m = -1e300, z = 0;
            for (j[size_t(dim)] = 0; j[size_t(dim)] < shape[size_t(dim)]; ++j[size_t(dim)])
              m = std::max(m, double(at(j)));
            for (j[size_t(dim)] = 0; j[size_t(dim)] < shape[size_t(dim)]; ++j[size_t(dim)])
              z += std::exp(double(at(j)) - m);
            const size_t k = size_t(((i[0] * 3 + i[1]) * 4 + i[2]) * 5 + i[3]);
            lref[k] = double(at(i)) - m - std::log(z);
            ref[k] = std::exp(lref[k]);
          }
    EXPECT_LT(nse(sy::softmax(x, dim).to_vector<float>(), ref), 1e-10);
    EXPECT_LT(nse(sy::log_softmax(x, dim - 4).to_vector<float>(), lref), 1e-10);
  }
  expect_error([&] { sy::transpose(x, 0, 4); }, {"transpose", "dim 4 out of range"});
  expect_error([&] { sy::softmax(x, -5); }, {"softmax", "dim -5 out of range"});
  expect_error([&] { sy::transpose(x.to(sy::DType::u8), 0, 1); },
               {"transpose", "4-byte dtype", "u8"});
}

TEST_P(OnDevice, EmbeddingGathersRowsAndAddsTheirGradientsInOrder) {
  const int64_t num = 6, dim = 5;
  auto wv = random_vec(size_t(num * dim), 91);
  Tensor w = sy::from_vector(wv, {num, dim}, D()).requires_grad_();
  // i64 indices of shape (2, 4), with repeats (row 3 four times, row 0 never).
  const std::vector<int64_t> iv{3, 1, 3, 5, 2, 3, 3, 4};
  Tensor idx = sy::from_vector(iv, {2, 4}, D());
  Tensor y = sy::embedding(idx, w);
  ASSERT_EQ(y.shape(), (sy::Shape{2, 4, dim}));
  auto got = y.to_vector<float>();
  for (size_t i = 0; i < iv.size(); ++i)
    for (int64_t d = 0; d < dim; ++d)
      EXPECT_EQ(got[i * dim + size_t(d)], wv[size_t(iv[i] * dim + d)]);
  auto gv = random_vec(iv.size() * dim, 92);
  (y * sy::from_vector(gv, {2, 4, dim}, D())).sum().backward();
  auto g = w.grad().to_vector<float>();
  for (int64_t v = 0; v < num; ++v)
    for (int64_t d = 0; d < dim; ++d) {
      float want = 0.f;  // in the order of the indices, in float: the kernels' own order
      for (size_t i = 0; i < iv.size(); ++i)
        if (iv[i] == v) want += gv[i * dim + size_t(d)];
      EXPECT_EQ(g[size_t(v * dim + d)], want) << v << "," << d;
    }
  // The module, and its errors.
  sy::manual_seed(5);
  sy::nn::Embedding emb(10, 4);
  emb.to(D());
  EXPECT_EQ(emb(sy::from_vector(std::vector<int32_t>{9}, {1}, D())).shape(), (sy::Shape{1, 4}));
  expect_error([&] { sy::embedding(idx.to(sy::DType::f32), w); },
               {"embedding", "i32 or i64 indices", "f32"});
  expect_error([&] { sy::embedding(idx, sy::zeros({6}, D())); },
               {"embedding", "(num_embeddings, dim)"});
  expect_error([&] { sy::embedding(idx, sy::zeros({6, 0}, D())); }, {"embedding", "dim > 0"});
  expect_error(
      [&] {
        sy::embedding(sy::from_vector(std::vector<int32_t>{-1}, {1}, D()), w).to_vector<float>();
      },
      {"embedding", "expected indices in [0, "});
  expect_error(
      [&] {
        sy::embedding(sy::from_vector(std::vector<int32_t>{1, 6}, {2}, D()), w).to_vector<float>();
      },
      {"embedding", "expected indices in [0, "});
  expect_error(
      [&] {
        sy::embedding(sy::from_vector(std::vector<int64_t>{int64_t(1) << 32}, {1}, D()), w)
            .to_vector<float>();
      },
      {"embedding", "expected indices in [0, "});
  // The device carries on after the error.
  EXPECT_EQ(
      sy::embedding(sy::from_vector(std::vector<int32_t>{0}, {1}, D()), w).to_vector<float>()[0],
      wv[0]);
}

INSTANTIATE_TEST_SUITE_P(Devices, OnDevice, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& i) { return device_param_name(i.param); });
