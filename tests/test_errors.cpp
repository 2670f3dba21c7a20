// SPDX-License-Identifier: MIT
// Bad input: every error names the op, what was expected and what was found.
#include "helpers.h"

using sy::Tensor;

TEST(Errors, MatmulShapeMismatch) {
  expect_error(
      [] {
        sy::matmul(sy::zeros({32, 784}), sy::zeros({128, 10}));
      },
      {"[matmul]", "(32,784)", "(128,10)", "inner dims 784 != 128"});
  expect_error(
      [] {
        sy::matmul(sy::zeros({4}), sy::zeros({3, 2}));
      },
      {"[matmul]", "(4)", "(3,2)", "inner dims 4 != 3"});
  expect_error(
      [] {
        sy::matmul(sy::zeros({2, 3, 4}), sy::zeros({3, 4, 5}));
      },
      {"[matmul]", "the same leading dimensions", "(2,3,4)", "(3,4,5)"});
  expect_error(
      [] {
        sy::matmul(sy::zeros({3, 4}), sy::zeros({2, 4, 5}));
      },
      {"[matmul]", "1-D or 2-D second operand for a 2-D first one", "(2,4,5)"});
  expect_error(
      [] {
        sy::matmul(sy::zeros({3, 4}), sy::zeros({3, 4}), true, true);
      },
      {"[matmul]", "inner dims"});
  expect_error(
      [] {
        sy::linear(sy::zeros({2, 5}), sy::zeros({3, 4}), sy::zeros({3}));
      },
      {"[linear]", "inner dims 5 != 4"});
  expect_error(
      [] {
        sy::linear(sy::zeros({2, 4}), sy::zeros({3, 4}), sy::zeros({2}));
      },
      {"[linear]", "bias of shape (3)", "(2)"});
}

TEST(Errors, TensorsOnDifferentDevices) {
  Tensor a = sy::zeros({2, 2});
  Tensor b = sy::zeros({2, 2}, mock_device());
  expect_error([&] { sy::add(a, b); },
               {"[add]", "expected all tensors to be on the same device", "cpu", "mock:0"});
  expect_error([&] { sy::matmul(a, b); }, {"[matmul]", "same device"});
  expect_error(
      [&] {
        sy::cross_entropy(a, sy::zeros({2}, sy::Options(mock_device()).dtype(sy::DType::i32)));
      },
      {"[cross_entropy]", "same device"});
  Tensor p = sy::zeros({2}).requires_grad_();
  p.set_grad(sy::zeros({2}, mock_device()));
  sy::optim::SGD opt({p}, 0.1f);
  expect_error([&] { opt.step(); }, {"[optimizer.step]", "cpu", "mock:0"});
}

TEST(Errors, UnknownAndUnavailableDevices) {
  mock_device();
  expect_error([] { sy::backend_device("gpu"); },
               {"[device]", "unknown device 'gpu'", "available devices: cpu"});
  expect_error([] { sy::backend_device("cpu:x"); }, {"[device]", "index", "'x'"});
  // Indices in canonical form only (vulkan:00000 used to be vulkan:0).
  expect_error([] { sy::backend_device("vulkan:00000"); },
               {"[device]", "without leading zeros", "'00000'"});
  expect_error([] { sy::backend_device("mock:01"); }, {"[device]", "'01'"});
  expect_error([] { sy::backend_device("cpu:-1"); }, {"[device]", "'-1'"});
  expect_error([] { sy::backend_device("cpu:1"); }, {"[device]", "'cpu:1' does not exist"});
  EXPECT_EQ(&sy::device("cpu:0"), &sy::cpu());
  expect_error([] { sy::backend_device("mock:3"); }, {"[device]", "'mock:3' does not exist"});
  for (auto& b : sy::backends())
    if (!b.available)
      expect_error([&] { sy::backend_device(b.name); },
                   {"[device]", "'" + b.name + "' is not available", b.reason});
  expect_error([] { sy::zeros({2}).to("tpu"); }, {"unknown device 'tpu'"});
}

TEST(Errors, BroadcastDtypeAndShapeChecks) {
  // Five alternating broadcast dimensions cannot be merged into the kernel's four.
  expect_error(
      [] {
        sy::add(sy::zeros({2, 1, 2, 1, 2}), sy::zeros({1, 2, 1, 2, 1}));
      },
      {"[add]", "(2,1,2,1,2)", "(1,2,1,2,1)", "5 alternating dimensions", "at most 4"});
  expect_error(
      [] {
        sy::add(sy::zeros({2, 3}), sy::zeros({4}));
      },
      {"[add]", "(2,3)", "(4)", "cannot be broadcast"});
  expect_error([] { sy::relu(sy::zeros({2}, sy::DType::i32)); },
               {"[relu]", "expected dtype f32", "i32"});
  expect_error([] { sy::zeros({2, 3}).reshape({4, 2}); }, {"[reshape]", "(2,3)", "(4,2)"});
  expect_error([] { sy::zeros({2, 3}).slice(1, 5); }, {"[slice]", "end <= 2"});
  expect_error([] { sy::zeros({2, 3}).item(); }, {"[item]", "one element", "(2,3)"});
  expect_error([] { sy::zeros({2}).to_vector<int32_t>(); }, {"[to_vector]", "i32", "f32"});
  expect_error(
      [] {
        sy::cross_entropy(sy::zeros({2, 3}), sy::zeros({2}));
      },
      {"[cross_entropy]", "labels of dtype i32", "f32"});
  expect_error(
      [] {
        sy::cross_entropy(sy::zeros({2, 3}), sy::zeros({3}, sy::DType::i32));
      },
      {"[cross_entropy]", "labels of shape (2)", "(3)"});
  expect_error([] { sy::softmax(sy::zeros({2, 3}), 2); }, {"[softmax]", "dim 2 out of range"});
  expect_error([] { sy::sum(sy::zeros({2, 3}), 2); }, {"[sum]", "dim 2 out of range"});
  expect_error(
      [] {
        sy::from_vector(std::vector<float>{1, 2}, {3});
      },
      {"[from_vector]", "expected 3", "found 2"});
  expect_error([] { sy::Tensor().shape(); }, {"undefined"});
  expect_error(
      [] {
        sy::nn::Linear(4, 2).forward(sy::zeros({3, 5}));
      },
      {"[Linear]", "(*, 4)", "(3,5)"});
}

TEST(Errors, BackwardOnNonScalarWithoutGradient) {
  Tensor x = sy::ones({4}).requires_grad_();
  expect_error([&] { (x * 2.f).backward(); }, {"[backward]", "scalar outputs", "(4)"});
  expect_error([&] { (x * 2.f).backward(sy::ones({3})); },
               {"[backward]", "gradient of shape (4)", "(3)"});
}

TEST(Errors, OptimizerAndModelArguments) {
  expect_error([] { sy::optim::SGD({sy::zeros({2})}, 0.1f); }, {"[optimizer]", "require grad"});
  expect_error(
      [] {
        sy::optim::Adam({sy::zeros({2}).requires_grad_()}, sy::optim::AdamOptions{.beta1 = 1.5f});
      },
      {"[Adam]", "betas in [0, 1)", "1.5"});
  expect_error([] { sy::data::DataLoader(nullptr, {}); }, {"[DataLoader]", "dataset"});
}

TEST(Errors, OutOfMemoryIsAnExceptionAndTheDeviceStaysUsable) {
  // 2^53 floats = 2^55 bytes: a legal shape (under 2^56 bytes), beyond any
  // address space whatever the overcommit policy.
  expect_error([] { sy::sum(sy::zeros({int64_t(1) << 53})).item(); },
               {"[allocate]", "cannot allocate"});
  EXPECT_FLOAT_EQ(sy::sum(sy::ones({8})).item(), 8.f);
  EXPECT_THROW(sy::sum(sy::zeros({int64_t(1) << 53})).item(), sy::OutOfMemory);
}

// Shape products and byte counts never wrap around (they used to: a 2^62
// element tensor got a 0-byte buffer, and 2^32 x 2^32 had 0 elements).
TEST(Errors, ShapesThatOverflowAreRefused) {
  const int64_t big = int64_t(1) << 32;
  expect_error([&] { sy::zeros({int64_t(1) << 62}); },
               {"[full]", "(4611686018427387904)", "f32", "at most 2^56 bytes"});
  expect_error(
      [&] {
        sy::zeros({big, big});
      },
      {"[full]", "(4294967296,4294967296)", "more elements than 2^63"});
  expect_error([&] { sy::ones({big, big}, sy::DType::i64); }, {"more elements than 2^63"});
  expect_error([&] { sy::rand({big, big, 4}); }, {"[rand]", "more elements"});
  float x = 0;
  expect_error([&] { sy::from_data(&x, sy::DType::f32, {big, big}); }, {"[from_data]"});
  expect_error([&] { sy::from_vector(std::vector<float>{}, {big, big}); }, {"[from_vector]"});
  Tensor empty = sy::zeros({0});
  Tensor e3 = empty.reshape({big, big, 0});  // zero elements: fine
  EXPECT_EQ(e3.numel(), 0);
  expect_error([&] { e3.reshape({big, big}); }, {"[reshape]", "more elements than 2^63"});
  expect_error([&] { sy::expand(sy::ones({1, 1}), {big, big}); }, {"[expand]"});
  // An op whose output would be too large: (2^31 x 1) @ (1 x 2^31) is 2^64 bytes.
  expect_error(
      [&] {
        sy::matmul(sy::zeros({int64_t(1) << 31, 1}), sy::zeros({1, int64_t(1) << 31}));
      },
      {"[gemm]", "at most 2^56 bytes"});
  // Zero-size dimensions are fine, whatever the others (as in PyTorch).
  EXPECT_EQ(sy::zeros({big, big, 0}).numel(), 0);
  EXPECT_EQ(sy::zeros({big, 0}).reshape({0, big}).numel(), 0);
}

TEST(Errors, EmptyTensorsReshapeAsInPyTorch) {
  Tensor e = sy::zeros({0, 5});
  EXPECT_EQ(e.flatten(1).shape(), (sy::Shape{0, 5}));
  EXPECT_EQ(e.reshape({5, 0}).shape(), (sy::Shape{5, 0}));
  EXPECT_EQ(e.reshape({-1, 5}).shape(), (sy::Shape{0, 5}));
  expect_error([&] { e.reshape({0, -1}); }, {"[reshape]", "ambiguous"});
}
