// SPDX-License-Identifier: MIT
// Autograd behaviour: accumulation, no-grad, shared subexpressions, errors.
#include "helpers.h"

using sy::Tensor;

TEST(Autograd, SharedSubexpressionsAddUp) {
  Tensor x = sy::from_vector(std::vector<float>{1, -2, 3}, {3}).requires_grad_();
  Tensor a = x * x;                     // used twice below
  Tensor y = sy::sum(a + a * 2.f + x);  // d/dx = 6x + 1
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{7, -11, 19}));
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor w = sy::from_vector(std::vector<float>{2, 3}, {2}).requires_grad_();
  sy::sum(w * 3.f).backward();
  sy::sum(w * w).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{3 + 4, 3 + 6}));
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, NoGradScopeRecordsNothing) {
  Tensor w = sy::ones({2}).requires_grad_();
  {
    sy::NoGradGuard ng;
    EXPECT_FALSE(sy::is_grad_enabled());
    Tensor y = w * 2.f;
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_TRUE(sy::is_grad_enabled());
  EXPECT_TRUE((w * 2.f).requires_grad());
}

TEST(Autograd, DetachStopsGradients) {
  Tensor x = sy::from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
  Tensor y = sy::sum(x * x.detach());  // d/dx = x (the detached factor is a constant)
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE((x * 2.f).is_leaf());
}

TEST(Autograd, OnlyLeavesKeepGradients) {
  Tensor x = sy::ones({2}).requires_grad_();
  Tensor h = x * 3.f;
  sy::sum(h * h).backward();
  EXPECT_FALSE(h.grad().defined());
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{18, 18}));
}

TEST(Autograd, NonScalarBackwardNeedsAGradient) {
  Tensor x = sy::ones({2, 3}).requires_grad_();
  Tensor y = x * 2.f;
  expect_error([&] { y.backward(); }, {"[backward]", "scalar", "(2,3)"});
  y.backward(sy::full({2, 3}, 0.5f));
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(6, 1.f));
}

TEST(Autograd, SecondBackwardIsAnErrorUnlessRetained) {
  Tensor x = sy::ones({2}).requires_grad_();
  Tensor y = sy::sum(x * x);
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 4}));
  expect_error([&] { y.backward(); }, {"[backward]", "second time"});
}

TEST(Autograd, BackwardOnTensorWithoutGradIsAnError) {
  expect_error([] { sy::ones({1}).backward(); }, {"[backward]", "does not require grad"});
}

TEST(Autograd, ForwardBackwardAndUpdateEvaluateLazilyInOneSubmission) {
  sy::BackendDevice& d = sy::backend_of(sy::cpu());
  Tensor w = sy::from_vector(random_vec(12, 1), {3, 4}).requires_grad_();
  Tensor x = sy::from_vector(random_vec(8, 2), {2, 4});
  auto before = d.counters().submissions;
  Tensor loss = sy::mean(sy::relu(sy::matmul(x, w, false, true)));
  loss.backward();
  EXPECT_EQ(d.counters().submissions, before) << "ops must not run before a value is needed";
  float l = loss.item();
  EXPECT_TRUE(std::isfinite(l));
  EXPECT_EQ(d.counters().submissions, before + 1);
  w.grad().to_vector<float>();  // the gradient was computed in the same submission
  EXPECT_EQ(d.counters().submissions, before + 1);
}

TEST(Autograd, SharedParametersAreListedAndUpdatedOnce) {
  auto layer = std::make_shared<sy::nn::Linear>(3, 3);
  sy::nn::Sequential seq;
  seq.add(layer).add(std::make_shared<sy::nn::Tanh>()).add(layer);  // tied weights
  EXPECT_EQ(seq.parameters().size(), 2u);
  Tensor w = layer->weight();
  auto w0 = w.to_vector<float>();
  std::vector<Tensor> twice{w, w};
  sy::optim::SGD opt(twice, 1.f);
  w.set_grad(sy::ones({3, 3}));
  opt.step();
  auto w1 = w.to_vector<float>();
  for (size_t i = 0; i < w0.size(); ++i) EXPECT_FLOAT_EQ(w1[i], w0[i] - 1.f) << "one step, not two";
}

TEST(Autograd, TheGradientSeedIsDetached) {
  Tensor x = sy::from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
  x.backward(x);
  EXPECT_NE(x.grad().impl(), x.impl());
  EXPECT_FALSE(x.grad().requires_grad());
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 2}));
}
