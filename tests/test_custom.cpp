// SPDX-License-Identifier: MIT
// Custom kernels (switchyard/custom.h) on every device: the sample's fused
// bias + SiLU, two outputs with scalar parameters, a shared-memory
// reduction, training steps that launch one (one submission per step), the
// public gradient check, and the errors: compile errors at the user's line,
// no code for the device, bad specs and launches. The disk cache across
// processes: tests/custom_kernel_cache.sh.
#include <cstdlib>
#include <cstring>

#include "../samples/bias_silu.h"
#include "custom_kernels.h"
#include "helpers.h"
#include "switchyard/custom.h"

using sy::Tensor;

namespace {

// Devices whose backend cannot compile custom kernels (a build without
// libshaderc, no NVRTC) skip with the reason; WithoutACompiler checks what
// they say.
class Custom : public OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    if (std::string why = sy::custom_kernels_unavailable(D()); !why.empty())
      GTEST_SKIP() << "custom kernels unavailable on " << GetParam() << ": " << why;
  }
};

#define SKIP_UNLESS_CUSTOM(name)                                                            \
  do {                                                                                      \
    SKIP_UNLESS_AVAILABLE(name);                                                            \
    if (std::string why_ = sy::custom_kernels_unavailable(sy::device(name)); !why_.empty()) \
      GTEST_SKIP() << "custom kernels unavailable on " << (name) << ": " << why_;           \
  } while (0)

std::vector<double> bias_silu_reference(const std::vector<float>& x, const std::vector<float>& b) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double z = double(x[i]) + double(b[i % b.size()]);
    y[i] = z / (1 + std::exp(-z));
  }
  return y;
}

}  // namespace

TEST_P(Custom, ElementwiseKernelMatchesTheReference) {
  sy::Device& d = D();
  const int64_t rows = 37, cols = 129;  // no multiple of the workgroup
  auto xh = random_vec(size_t(rows * cols), 1, -6.f, 6.f), bh = random_vec(size_t(cols), 2);
  Tensor x = sy::from_vector(xh, {rows, cols}, d), b = sy::from_vector(bh, {cols}, d);
  EXPECT_LT(nse(bias_silu::apply(x, b).to_vector<float>(), bias_silu_reference(xh, bh)), 1e-12);
  // A view starting mid-buffer (516 bytes in): the kernel still indexes from 0.
  Tensor tail = x.slice(1, rows);
  std::vector<float> th(xh.begin() + cols, xh.end());
  EXPECT_LT(nse(bias_silu::apply(tail, b).to_vector<float>(), bias_silu_reference(th, bh)), 1e-12);
}

TEST_P(Custom, TwoOutputsOfTwoDtypesAndScalarsThatChangeBetweenRuns) {
  sy::BackendDevice& d = D();
  const int64_t n = 1000;
  auto xh = random_vec(size_t(n), 3);
  xh[7] = 0.f;
  Tensor x = sy::from_vector(xh, {n}, d);
  auto run = [&](float alpha, float beta) {
    auto out =
        test_kernels::scale_sign()({x}, test_kernels::ScaleSignParams{alpha, beta, uint32_t(n)});
    EXPECT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].dtype(), sy::DType::i32);
    auto y = out[0].to_vector<float>();
    auto s = out[1].to_vector<int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_FLOAT_EQ(y[size_t(i)], alpha * xh[size_t(i)] + beta) << i;
      ASSERT_EQ(s[size_t(i)], xh[size_t(i)] > 0 ? 1 : xh[size_t(i)] < 0 ? -1 : 0) << i;
    }
  };
  for (int i = 0; i < 3; ++i) run(2.f, 0.5f);  // each of the recording's frames used
  const auto c0 = d.counters();
  run(-3.f, 1.f);  // new scalars: the same Program
  const auto c1 = d.counters();
  // Vulkan replays the recording (the scalars are in the launch table);
  // CUDA graphs hold their launches' arguments, so CUDA updates or captures.
  if (d.info().backend == "vulkan") {
    EXPECT_EQ(c1.command_recordings, c0.command_recordings);
  }
  EXPECT_EQ(c1.launches_by_kernel[size_t(sy::Kernel::custom)] -
                c0.launches_by_kernel[size_t(sy::Kernel::custom)],
            1u);
}

TEST_P(Custom, SharedMemoryReductionMatchesTheReference) {
  sy::Device& d = D();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{50, 1000}, {3, 7}, {1, 64}}) {
    auto xh = random_vec(size_t(rows * cols), uint32_t(rows + cols));
    Tensor x = sy::from_vector(xh, {rows, cols}, d);
    Tensor s =
        test_kernels::row_sum()({x}, test_kernels::RowSumParams{uint32_t(rows), uint32_t(cols)})[0];
    ASSERT_EQ(s.shape(), (sy::Shape{rows}));
    std::vector<double> ref(size_t(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) ref[size_t(r)] += xh[size_t(r * cols + c)];
    EXPECT_LT(nse(s.to_vector<float>(), ref), 1e-12) << rows << "x" << cols;
  }
}

TEST_P(Custom, TrainingStepWithACustomKernelIsOneSubmissionAfterWarmup) {
  sy::BackendDevice& d = D();
  sy::manual_seed(3);
  auto model = std::make_shared<sy::nn::Sequential>();
  model->add(std::make_shared<sy::nn::Linear>(20, 16, /*bias=*/false));
  model->add(std::make_shared<bias_silu::BiasSiLU>(16));
  model->add(std::make_shared<sy::nn::Linear>(16, 4));
  model->to(d);
  sy::optim::SGD opt(model->parameters(), {.lr = 0.1f, .momentum = 0.9f});
  std::vector<int32_t> labels(32);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t(i % 4);
  Tensor y = sy::from_vector(labels, {32}).to(d);
  auto step = [&](int i) {
    Tensor x = sy::from_vector(random_vec(32 * 20, uint32_t(10 + i % 3)), {32, 20}).to(d);
    opt.zero_grad();
    Tensor loss = sy::cross_entropy((*model)(x), y);
    loss.backward();
    opt.step();
    return loss.item();
  };
  const float first = step(0);
  for (int i = 1; i < 5; ++i) step(i);
  const auto c0 = d.counters();
  float last = 0;
  for (int i = 5; i < 25; ++i) last = step(i);
  const auto c1 = d.counters();
  EXPECT_EQ(c1.submissions - c0.submissions, 20u) << "one Program per step";
  if (d.info().type != sy::DeviceType::cpu) {
    EXPECT_EQ(c1.queue_submits - c0.queue_submits, 20u) << "one queue submission per step";
    EXPECT_EQ(c1.command_recordings - c0.command_recordings, 0u) << "replayed, not re-recorded";
  }
  // Forward and backward kernels, every step.
  EXPECT_EQ(c1.launches_by_kernel[size_t(sy::Kernel::custom)] -
                c0.launches_by_kernel[size_t(sy::Kernel::custom)],
            40u);
  EXPECT_EQ(c1.buffer_allocations - c0.buffer_allocations, 0u);
  EXPECT_LT(last, first) << "trains";
}

TEST_P(Custom, GradcheckPassesForTheKernelAndCatchesAWrongBackward) {
  sy::Device& d = D();
  Tensor x = sy::from_vector(random_vec(4 * 6, 5, -3.f, 3.f), {4, 6}, d).requires_grad_();
  Tensor b = sy::from_vector(random_vec(6, 6), {6}, d).requires_grad_();
  auto f = [](const std::vector<Tensor>& in) { return bias_silu::apply(in[0], in[1]); };
  sy::GradcheckResult r = sy::gradcheck(f, {x, b});
  EXPECT_TRUE(r.ok) << r.report;
  EXPECT_LT(r.max_abs_error, 1e-2);
  // The same forward with a backward off by a factor of 2: gradcheck fails.
  static const sy::CustomKernel wrong([] {
    sy::KernelSpec s = bias_silu::forward_kernel().spec();
    s.name = "bias_silu_wrong_backward";
    auto good = s.backward;
    s.backward = [good](const sy::CustomBackwardArgs& a) {
      auto g = good(a);
      for (auto& t : g) t = sy::mul(t, 2.f);
      return g;
    };
    return s;
  }());
  auto g = [](const std::vector<Tensor>& in) {
    return wrong({in[0], in[1]}, bias_silu::params_for(in[0]))[0];
  };
  sy::GradcheckResult bad = sy::gradcheck(g, {x, b});
  EXPECT_FALSE(bad.ok) << bad.report;
  EXPECT_NE(bad.report.find("outside the tolerance"), std::string::npos) << bad.report;
}

TEST_P(Custom, TwoDifferentiableOutputsEachGetTheirGradientAndFeedAnotherKernel) {
  sy::Device& d = D();
  const int64_t n = 12;  // a multiple of the kernel's workgroup (4)
  Tensor x = sy::from_vector(random_vec(size_t(n), 21), {n}, d).requires_grad_();
  // The backward runs once per output whose gradient flows; autograd adds them.
  auto f = [](const std::vector<Tensor>& in) {
    auto out = test_kernels::double_square()({in[0]});
    return sy::add(sy::mul(out[0], 3.f), out[1]);  // 6x + x^2
  };
  sy::GradcheckResult r = sy::gradcheck(f, {x});
  EXPECT_TRUE(r.ok) << r.report;
  Tensor y = f({x});
  sy::sum(y).backward();
  auto xh = x.to_vector<float>(), gh = x.grad().to_vector<float>();
  for (size_t i = 0; i < xh.size(); ++i) ASSERT_NEAR(gh[i], 6.f + 2.f * xh[i], 1e-5f) << i;
  // Output 1 (a view 256 bytes into the packed buffer) as another launch's
  // input: x^2 doubled and squared, read after the first kernel wrote it.
  auto first = test_kernels::double_square()({x.detach()});
  auto second = test_kernels::double_square()({first[1]});
  auto y2 = second[0].to_vector<float>(), q2 = second[1].to_vector<float>();
  for (size_t i = 0; i < xh.size(); ++i) {
    const float sq = xh[i] * xh[i];
    ASSERT_FLOAT_EQ(y2[i], 2.f * sq) << i;
    ASSERT_FLOAT_EQ(q2[i], sq * sq) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Custom, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& i) { return device_param_name(i.param); });

TEST(CustomKernel, CompileErrorNamesTheLineOfTheUsersSource) {
  SKIP_UNLESS_CUSTOM("vulkan:0");
  sy::Device& d = sy::device("vulkan:0");
  sy::CustomKernel broken({
      .name = "broken_kernel",
      .glsl = "SY_OUTPUT(0, float, y)\n"
              "SY_INPUT(1, float, x)\n"
              "void main() {\n"
              "  y[0] = x[0] + undefined_name;\n"
              "}\n",
      .inputs = {{"x"}},
      .outputs = {{"y"}},
  });
  Tensor x = sy::ones({4}, d);
  try {
    (void)broken({x});
    FAIL() << "a compile error was expected";
  } catch (const sy::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[custom kernel broken_kernel]"), std::string::npos) << m;
    EXPECT_NE(m.find("broken_kernel.comp:4: error"), std::string::npos) << m;
    EXPECT_NE(m.find("undefined_name"), std::string::npos) << m;
  }
  // Nothing was cached for it, and the device still works.
  EXPECT_FLOAT_EQ(sy::sum(x).item(), 4.f);
}

TEST(CustomKernel, NoCodeForTheDeviceNamesTheBackendsItHas) {
  sy::CustomKernel glsl_only({.name = "glsl_only",
                              .glsl = "SY_OUTPUT(0, float, y)\nvoid main() {}\n",
                              .inputs = {{"x"}},
                              .outputs = {{"y"}}});
  try {
    (void)glsl_only({sy::ones({2})});
    FAIL() << "cpu has no code";
  } catch (const sy::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("expected code for cpu"), std::string::npos) << m;
    EXPECT_NE(m.find("found code for: GLSL (vulkan)"), std::string::npos) << m;
  }
  EXPECT_FALSE(glsl_only.has_code_for(sy::cpu()));
  if (unavailable_reason("vulkan:0").empty()) {  // checked before compiling: any build
    sy::CustomKernel cpu_only({.name = "cpu_only",
                               .cpu = [](const sy::CpuKernelArgs&) {},
                               .inputs = {{"x"}},
                               .outputs = {{"y"}}});
    try {
      (void)cpu_only({sy::ones({2}, sy::device("vulkan:0"))});
      FAIL() << "vulkan has no code";
    } catch (const sy::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("expected code for vulkan:0"), std::string::npos) << m;
      EXPECT_NE(m.find("a CPU callable (cpu)"), std::string::npos) << m;
    }
  }
}

TEST(CustomKernel, BadSpecsAndLaunchesAreClearErrors) {
  auto spec_error = [](sy::KernelSpec s) {
    try {
      sy::CustomKernel k(std::move(s));
    } catch (const sy::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto cpu = [](const sy::CpuKernelArgs&) {};
  EXPECT_NE(spec_error({.name = "has space", .cpu = cpu, .inputs = {{"x"}}, .outputs = {{"y"}}})
                .find("expected a name of letters, digits and '_'"),
            std::string::npos);
  EXPECT_NE(spec_error({.name = "six",
                        .cpu = cpu,
                        .inputs = {{"a"}, {"b"}, {"c"}, {"d"}, {"e"}},
                        .outputs = {{"y"}}})
                .find("expected at most 5 tensor arguments (outputs and inputs), found 6"),
            std::string::npos);
  EXPECT_NE(
      spec_error(
          {.name = "big", .cpu = cpu, .inputs = {{"x"}}, .outputs = {{"y"}}, .params_bytes = 65})
          .find("expected at most 64 bytes of parameters, found 65"),
      std::string::npos);
  EXPECT_NE(spec_error({.name = "none", .inputs = {{"x"}}, .outputs = {{"y"}}})
                .find("expected GLSL, CUDA or a CPU callable, found none"),
            std::string::npos);
  EXPECT_NE(spec_error({.name = "wide",
                        .cpu = cpu,
                        .inputs = {{"x"}},
                        .outputs = {{"y"}},
                        .workgroup = {2048, 1, 1}})
                .find("expected a workgroup of 1 to 1024 invocations"),
            std::string::npos);

  const sy::CustomKernel& k = bias_silu::forward_kernel();
  Tensor x = sy::ones({2, 3}), b = sy::ones({3});
  auto launch_error = [](auto&& f) {
    try {
      f();
    } catch (const sy::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(launch_error([&] {
              (void)k({x}, bias_silu::params_for(x));
            }).find("[custom kernel bias_silu] expected 2 inputs, found 1"),
            std::string::npos);
  EXPECT_NE(launch_error([&] {
              (void)k({x, b.to(sy::DType::i32)}, bias_silu::params_for(x));
            }).find("expected input 1 ('b') of dtype f32, found i32"),
            std::string::npos);
  EXPECT_NE(launch_error([&] {
              (void)k({x, b});
            }).find("expected 8 bytes of parameters, found 0"),
            std::string::npos);
  EXPECT_NE(launch_error([&] {
              (void)k({x, b.to(mock_device())}, bias_silu::params_for(x));
            }).find("expected all tensors to be on the same device"),
            std::string::npos);
  // A kernel with no backward: differentiating through it says so.
  sy::CustomKernel plain({.name = "no_backward",
                          .cpu =
                              [](const sy::CpuKernelArgs& a) {
                                std::memcpy(a.outputs[0], a.inputs[0], a.input_bytes[0]);
                              },
                          .inputs = {{"x"}},
                          .outputs = {{"y"}}});
  Tensor w = sy::ones({3}).requires_grad_();
  Tensor out = sy::sum(plain({w})[0]);
  EXPECT_FLOAT_EQ(out.item(), 3.f);
  EXPECT_NE(launch_error([&] {
              out.backward();
            }).find("[custom kernel no_backward] expected a backward (KernelSpec::backward)"),
            std::string::npos);
}

TEST(CustomKernel, AKernelThatWritesAnInputIsRefusedBeforeItRuns) {
  SKIP_UNLESS_CUSTOM("vulkan:0");
  sy::Device& d = sy::device("vulkan:0");
  // Barriers come from the declared roles: an input written behind the
  // scheduler's back would race with its other readers.
  sy::CustomKernel writes({.name = "writes_its_input",
                           .glsl = "SY_OUTPUT(0, float, y)\n"
                                   "layout(set = 0, binding = 1) buffer In { float x[]; };\n"
                                   "void main() { uint i = gl_GlobalInvocationID.x;\n"
                                   "  if (i < 4u) { y[i] = x[i]; x[i] = 0.0; } }\n",
                           .inputs = {{"x"}},
                           .outputs = {{"y"}}});
  Tensor x = sy::ones({4}, d);
  try {
    (void)writes({x});
    FAIL() << "a written input was expected to be refused";
  } catch (const sy::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[custom kernel writes_its_input] expected binding 1 (input 'x') to be "
                     "read-only (SY_INPUT, or `readonly`), found it writable"),
              std::string::npos)
        << m;
  }
  EXPECT_FLOAT_EQ(sy::sum(x).item(), 4.f) << "untouched, and the device still works";
}

TEST(CustomKernel, CompiledCodeIsReusedWithinTheProcess) {
  SKIP_UNLESS_CUSTOM("vulkan:0");
  sy::Device& d = sy::device("vulkan:0");
  auto spec = [] {
    return sy::KernelSpec{.name = "twice",
                          .glsl =
                              "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                              "void main() { uint i = gl_GlobalInvocationID.x;\n"
                              "  if (i < 8u) y[i] = 2.0 * x[i]; }\n",
                          .inputs = {{"x"}},
                          .outputs = {{"y"}}};
  };
  sy::CustomKernel a(spec()), b(spec());  // two registrations of one source
  Tensor x = sy::arange(8, d);
  const auto s0 = sy::custom_kernel_stats();
  EXPECT_FLOAT_EQ(sy::sum(a({x})[0]).item(), 56.f);
  const auto s1 = sy::custom_kernel_stats();
  EXPECT_FLOAT_EQ(sy::sum(b({x})[0]).item(), 56.f);
  const auto s2 = sy::custom_kernel_stats();
  EXPECT_EQ(s1.compiles + s1.disk_hits, s0.compiles + s0.disk_hits + 1)
      << "compiled or loaded once";
  EXPECT_EQ(s2.compiles, s1.compiles) << "the second is this process's cached code";
  EXPECT_EQ(s2.memory_hits, s1.memory_hits + 1);
}

// A device whose backend has no compiler here (a build with
// SWITCHYARD_SHADERC=OFF: scripts/test.sh's sanitizer build) says why at the
// launch, and everything else on it works.
TEST(CustomKernel, WithoutACompilerKernelsSayWhyAndEverythingElseWorks) {
  int checked = 0;
  for (sy::Device* d : sy::devices()) {
    const std::string why = sy::custom_kernels_unavailable(*d);
    if (why.empty()) continue;
    ++checked;
    Tensor x = sy::ones({2, 3}, *d), b = sy::ones({3}, *d);
    try {
      (void)bias_silu::apply(x, b);
      ADD_FAILURE() << "a launch on " << d->str() << " was expected to fail";
    } catch (const sy::Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[custom kernel bias_silu]"), std::string::npos)
          << e.what();
    }
    EXPECT_FLOAT_EQ(sy::sum(sy::relu(x)).item(), 6.f) << d->str();
  }
  if (checked == 0)
    GTEST_SKIP() << "every device here has its compiler (the build with SWITCHYARD_SHADERC=OFF "
                    "runs this)";
}
