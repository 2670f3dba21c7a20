// SPDX-License-Identifier: MIT
// Every op's gradient against central finite differences. The forward runs in
// f32, so differences use a step of 1e-2 (accumulated in double) and the bound
// is a relative error below 1e-2; inputs avoid kinks (relu at 0).
#include "helpers.h"

using sy::Tensor;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

namespace {

// Checks d(sum(f(x) * w))/dx_i for every input against finite differences,
// with a fixed random weighting w so every output element matters.
void gradcheck(sy::BackendDevice& dev, const char* name, const Fn& f,
               const std::vector<sy::Shape>& shapes, uint32_t seed = 1, float lo = -1.f,
               float hi = 1.f) {
  SCOPED_TRACE(name);
  std::vector<std::vector<float>> vals;
  for (size_t i = 0; i < shapes.size(); ++i)
    vals.push_back(random_vec(size_t(sy::numel(shapes[i])), seed + uint32_t(i), lo, hi));
  sy::Shape out_shape = f([&] {
                          std::vector<Tensor> in;
                          for (size_t i = 0; i < shapes.size(); ++i)
                            in.push_back(sy::from_vector(vals[i], shapes[i], dev));
                          return in;
                        }())
                            .shape();
  auto w = random_vec(size_t(sy::numel(out_shape)), seed + 100, 0.5f, 1.5f);
  auto loss = [&](const std::vector<std::vector<float>>& v, bool grad, std::vector<Tensor>* ins) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < shapes.size(); ++i) {
      in.push_back(sy::from_vector(v[i], shapes[i], dev));
      if (grad) in.back().requires_grad_();
    }
    Tensor out = f(in);
    Tensor l = sy::sum(out * sy::from_vector(w, out_shape, dev));
    if (ins) *ins = in;
    return l;
  };
  std::vector<Tensor> ins;
  Tensor l = loss(vals, true, &ins);
  l.backward();
  for (size_t i = 0; i < shapes.size(); ++i) {
    ASSERT_TRUE(ins[i].grad().defined()) << "no gradient for input " << i;
    auto analytic = ins[i].grad().to_vector<float>();
    ASSERT_EQ(analytic.size(), vals[i].size());
    double num2 = 0, err2 = 0;
    const float eps = 1e-2f;
    for (size_t k = 0; k < vals[i].size(); ++k) {
      auto plus = vals, minus = vals;
      plus[i][k] += eps;
      minus[i][k] -= eps;
      double fd =
          (double(loss(plus, false, nullptr).item()) - double(loss(minus, false, nullptr).item())) /
          (2.0 * double(eps));
      num2 += fd * fd;
      err2 += (fd - analytic[k]) * (fd - analytic[k]);
    }
    EXPECT_LT(std::sqrt(err2) / std::max(std::sqrt(num2), 1e-3), 1e-2) << "input " << i;
  }
}

}  // namespace

TEST_P(OnDevice, GradMatmul) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      gradcheck(D(), "matmul", [=](auto& x) { return sy::matmul(x[0], x[1], ta, tb); },
                {ta ? sy::Shape{4, 3} : sy::Shape{3, 4}, tb ? sy::Shape{5, 4} : sy::Shape{4, 5}});
}

TEST_P(OnDevice, GradLinear) {
  gradcheck(D(), "linear", [](auto& x) { return sy::linear(x[0], x[1], x[2]); },
            {{3, 4}, {5, 4}, {5}});
  gradcheck(D(), "linear_nobias", [](auto& x) { return sy::linear(x[0], x[1]); }, {{3, 4}, {2, 4}});
}

TEST_P(OnDevice, GradTranspose) {
  gradcheck(D(), "transpose", [](auto& x) { return sy::transpose(x[0]); }, {{3, 5}});
  for (auto dims : {std::pair{0, 1}, {1, 3}, {-1, 0}, {2, 2}}) {
    const int d0 = dims.first, d1 = dims.second;  // (clang 14 cannot capture bindings)
    gradcheck(D(), "transpose_dims", [=](auto& x) { return sy::transpose(x[0], d0, d1); },
              {{2, 3, 4, 3}});
  }
}

TEST_P(OnDevice, GradBinaryWithBroadcasting) {
  std::vector<std::pair<sy::Shape, sy::Shape>> shapes = {
      {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 4}, {3, 1}}, {{3, 4}, {1}}, {{2, 3, 4}, {3, 1}}};
  for (auto& [a, b] : shapes) {
    gradcheck(D(), "add", [](auto& x) { return x[0] + x[1]; }, {a, b});
    gradcheck(D(), "sub", [](auto& x) { return x[0] - x[1]; }, {a, b});
    gradcheck(D(), "mul", [](auto& x) { return x[0] * x[1]; }, {a, b});
    gradcheck(D(), "div", [](auto& x) { return x[0] / (x[1] * x[1] + 1.f); }, {a, b});
  }
}

TEST_P(OnDevice, GradScalarOps) {
  gradcheck(D(), "scalar", [](auto& x) { return (2.f - x[0]) * 3.f + x[0] / 4.f - (-x[0]) + 1.f; },
            {{3, 4}});
}

TEST_P(OnDevice, GradActivations) {
  gradcheck(
      D(), "relu", [](auto& x) { return sy::relu(x[0]); }, {{4, 5}}, 3, 0.05f, 1.f);
  gradcheck(
      D(), "relu_neg", [](auto& x) { return sy::relu(x[0] - 2.f); }, {{4, 5}}, 3, 0.05f, 1.f);
  gradcheck(
      D(), "gelu", [](auto& x) { return sy::gelu(x[0]); }, {{4, 5}}, 4, -2.f, 2.f);
  gradcheck(D(), "tanh", [](auto& x) { return sy::tanh(x[0]); }, {{4, 5}});
  gradcheck(D(), "sigmoid", [](auto& x) { return sy::sigmoid(x[0]); }, {{4, 5}});
  gradcheck(D(), "exp", [](auto& x) { return sy::exp(x[0]); }, {{4, 5}});
  gradcheck(
      D(), "log", [](auto& x) { return sy::log(x[0]); }, {{4, 5}}, 5, 0.5f, 2.f);
  gradcheck(
      D(), "sqrt", [](auto& x) { return sy::sqrt(x[0]); }, {{4, 5}}, 6, 0.5f, 2.f);
  gradcheck(D(), "square", [](auto& x) { return sy::square(x[0]); }, {{4, 5}});
}

TEST_P(OnDevice, GradReductions) {
  gradcheck(D(), "sum", [](auto& x) { return sy::sum(x[0]); }, {{3, 4}});
  gradcheck(D(), "mean", [](auto& x) { return sy::mean(x[0]); }, {{3, 4}});
  for (int64_t axis : {0, 1, 2, -1}) {
    gradcheck(D(), "sum_axis", [=](auto& x) { return sy::sum(x[0], axis); }, {{2, 3, 4}});
    gradcheck(D(), "mean_axis_keep", [=](auto& x) { return sy::mean(x[0], axis, true); },
              {{2, 3, 4}});
  }
  gradcheck(D(), "expand", [](auto& x) { return sy::expand(x[0], {3, 2, 4}); }, {{2, 1}});
  gradcheck(D(), "sum_to", [](auto& x) { return sy::sum_to(x[0], {3, 1}); }, {{2, 3, 4}});
}

TEST_P(OnDevice, GradSoftmaxAndLosses) {
  gradcheck(D(), "softmax", [](auto& x) { return sy::softmax(x[0]); }, {{3, 5}});
  gradcheck(D(), "log_softmax", [](auto& x) { return sy::log_softmax(x[0]); }, {{3, 5}});
  {
    Tensor idx = sy::from_vector(std::vector<int32_t>{2, 0, 2, 3, 2}, {5}, D());
    gradcheck(D(), "embedding", [=](auto& x) { return sy::embedding(idx, x[0]) * x[1]; },
              {{4, 3}, {5, 3}});
  }
  for (int dim : {0, 1}) {
    gradcheck(D(), "softmax_dim", [=](auto& x) { return sy::softmax(x[0], dim); }, {{3, 4, 2}});
    gradcheck(D(), "log_softmax_dim", [=](auto& x) { return sy::log_softmax(x[0], dim); },
              {{3, 4, 2}});
  }
  Tensor labels = sy::from_vector(std::vector<int32_t>{2, 0, 4}, {3}, D());
  gradcheck(
      D(), "cross_entropy", [&](auto& x) { return sy::cross_entropy(x[0], labels); }, {{3, 5}}, 7,
      -2.f, 2.f);
  gradcheck(D(), "mse_loss", [](auto& x) { return sy::mse_loss(x[0], x[1]); }, {{3, 4}, {3, 4}});
}

TEST_P(OnDevice, GradViewsAndMoves) {
  gradcheck(D(), "reshape", [](auto& x) { return x[0].reshape({4, 3}) * 2.f; }, {{3, 4}});
  gradcheck(D(), "slice", [](auto& x) { return x[0].slice(1, 3) * x[0].slice(0, 2); }, {{4, 3}});
  gradcheck(D(), "flatten", [](auto& x) { return x[0].flatten(); }, {{2, 3, 2}});
  sy::Device& other = &D() == &mock_device() ? sy::cpu() : static_cast<sy::Device&>(mock_device());
  gradcheck(D(), "to_other_device",
            [&](auto& x) { return (x[0].to(other) * 3.f).to(x[0].device()); }, {{2, 3}});
}

TEST_P(OnDevice, GradDropoutAndLayerNorm) {
  gradcheck(D(), "dropout",
            [](const auto& in) {
              sy::manual_seed(5);  // the same mask at every evaluation
              return sy::dropout(in[0], 0.4f);
            },
            {{6, 7}});
  gradcheck(D(), "layer_norm", [](const auto& in) { return sy::layer_norm(in[0], in[1], in[2]); },
            {{4, 9}, {9}, {9}});
}

TEST_P(OnDevice, GradBmm) {
  gradcheck(D(), "bmm", [](auto& x) { return sy::bmm(x[0], x[1]); }, {{3, 2, 4}, {3, 4, 5}});
  gradcheck(D(), "matmul_stacks", [](auto& x) { return sy::matmul(x[0], x[1]); },
            {{2, 2, 3, 4}, {2, 2, 4, 2}});
}

TEST_P(OnDevice, GradConv2d) {
  gradcheck(D(), "conv2d", [](auto& x) { return sy::conv2d(x[0], x[1], x[2], 1, 1); },
            {{2, 3, 5, 4}, {4, 3, 3, 3}, {4}});
  // Stride, dilation, asymmetric padding and groups, no bias.
  gradcheck(D(), "conv2d_groups",
            [](auto& x) {
              return sy::conv2d(x[0], x[1], sy::Tensor(), {2, 1}, {1, 2}, {1, 2}, 2);
            },
            {{2, 4, 6, 5}, {6, 2, 3, 2}});
}

TEST_P(OnDevice, GradPooling) {
  // Max pooling: small inputs on distinct levels 0.05 apart, so that no step
  // of the finite differences changes which element of a window wins.
  auto levels = [](const sy::Tensor& x) {
    std::vector<float> v(size_t(x.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.05f * float(i);
    std::shuffle(v.begin(), v.end(), std::mt19937(3));
    return x + sy::from_vector(v, x.shape(), x.device());
  };
  gradcheck(
      D(), "max_pool2d", [&](auto& x) { return sy::max_pool2d(levels(x[0]), 2); }, {{2, 3, 6, 5}},
      7, -0.01f, 0.01f);
  gradcheck(
      D(), "max_pool2d_pad", [&](auto& x) { return sy::max_pool2d(levels(x[0]), 3, 2, 1); },
      {{1, 2, 7, 6}}, 9, -0.01f, 0.01f);
  gradcheck(D(), "avg_pool2d", [](auto& x) { return sy::avg_pool2d(x[0], 3, 2, 1); },
            {{2, 2, 7, 6}});
  gradcheck(D(), "avg_pool2d_exclude_pad",
            [](auto& x) {
              return sy::avg_pool2d(x[0], {3, 2}, {1, 2}, {1, 1}, false);
            },
            {{1, 2, 5, 6}});
  gradcheck(D(), "adaptive_avg_pool2d", [](auto& x) { return sy::adaptive_avg_pool2d(x[0]); },
            {{2, 3, 4, 5}});
}

TEST_P(OnDevice, GradBatchNorm) {
  gradcheck(
      D(), "batch_norm_train",
      [](auto& x) { return sy::batch_norm(x[0], sy::Tensor(), sy::Tensor(), x[1], x[2], true); },
      {{4, 3, 2, 3}, {3}, {3}});
  gradcheck(
      D(), "batch_norm_1d",
      [](auto& x) { return sy::batch_norm(x[0], sy::Tensor(), sy::Tensor(), x[1], x[2], true); },
      {{5, 4}, {4}, {4}});
  gradcheck(D(), "batch_norm_eval",
            [](auto& x) {
              sy::Device& d = x[0].device();
              return sy::batch_norm(x[0], sy::full({3}, 0.2f, d), sy::full({3}, 1.5f, d), x[1],
                                    x[2], false);
            },
            {{2, 3, 2, 2}, {3}, {3}});
}

TEST_P(OnDevice, GradTwoLayerMlp) {
  gradcheck(D(), "mlp",
            [](auto& x) {
              return sy::cross_entropy(
                  sy::linear(sy::tanh(sy::linear(x[0], x[1], x[2])), x[3], x[4]),
                  sy::from_vector(std::vector<int32_t>{1, 0}, {2}, x[0].device()));
            },
            {{2, 4}, {3, 4}, {3}, {2, 3}, {2}});
}

INSTANTIATE_TEST_SUITE_P(Devices, OnDevice, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& i) { return device_param_name(i.param); });
