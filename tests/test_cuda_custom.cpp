// SPDX-License-Identifier: MIT
// Custom CUDA kernels at compile level, which needs no GPU: NVRTC compiles
// the sample's and the tests' kernels to PTX for every architecture this
// build targets, and a compile error names the line of the user's source.
// Their launches run in test_custom on cuda:0 where a GPU is present (and
// are skipped with the reason where not).
#include <algorithm>
#include <string>
#include <vector>

#include "../samples/bias_silu.h"
#include "cuda_arch.h"
#include "cuda_custom.h"
#include "custom_kernels.h"
#include "helpers.h"

namespace {

// The virtual architectures of CMAKE_CUDA_ARCHITECTURES ("75-real,80,90a"
// gives 75, 80, 90).
std::vector<int> built_archs() {
  std::vector<int> out;
  std::string s(sy::cuda_impl::built_architectures());
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(std::stoi(s.substr(i, j - i)));
    i = s.find_first_of(",;", j);
    if (i == std::string::npos) break;
    ++i;
  }
  // A list CMake resolves itself (native, all, all-major): Turing's, which
  // every NVRTC this build takes compiles for.
  if (out.empty()) out.push_back(75);
  return out;
}

}  // namespace

TEST(CudaCustom, NvrtcCompilesTheKernelsForEveryArchitectureOfThisBuild) {
  const std::string why = sy::cuda_impl::nvrtc_unavailable_reason();
  ASSERT_TRUE(why.empty()) << "NVRTC ships with the toolkit this build used: " << why;
  const std::vector<int> archs = built_archs();
  const sy::CustomKernel* kernels[] = {&bias_silu::forward_kernel(), &bias_silu::backward_kernel(),
                                       &test_kernels::scale_sign(), &test_kernels::row_sum(),
                                       &test_kernels::double_square()};
  for (int arch : archs)
    for (const sy::CustomKernel* k : kernels) {
      const std::string ptx = sy::cuda_impl::nvrtc_ptx(k->spec(), arch);
      EXPECT_NE(ptx.find(".target sm_" + std::to_string(arch)), std::string::npos)
          << k->spec().name << " for compute_" << arch;
      EXPECT_NE(ptx.find(".entry " + k->spec().cuda_entry), std::string::npos)
          << k->spec().name << " for compute_" << arch << ":\n"
          << ptx.substr(0, 2000);
    }
}

TEST(CudaCustom, NvrtcWritesACubinForEveryArchitectureOfThisBuildItKnows) {
  ASSERT_TRUE(sy::cuda_impl::nvrtc_unavailable_reason().empty());
  // What a device of that compute capability loads (no PTX for its driver to read).
  const std::vector<int> known = sy::cuda_impl::nvrtc_architectures();
  int compiled = 0;
  for (int arch : built_archs()) {
    if (std::find(known.begin(), known.end(), arch) == known.end()) continue;
    const std::string cubin =
        sy::cuda_impl::nvrtc_compile(bias_silu::forward_kernel().spec(), arch, true);
    EXPECT_EQ(cubin.rfind("\x7f"
                          "ELF",
                          0),
              0u)
        << "an ELF image for sm_" << arch;
    EXPECT_NE(cubin.find("bias_silu"), std::string::npos) << "its entry's name, sm_" << arch;
    ++compiled;
  }
  EXPECT_GT(compiled, 0) << "NVRTC knows none of " << sy::cuda_impl::built_architectures();
}

TEST(CudaCustom, TheEntriesTakeWhatTheLaunchPasses) {
  ASSERT_TRUE(sy::cuda_impl::nvrtc_unavailable_reason().empty());
  // One pointer per argument, then the parameter struct, as cuLaunchKernel
  // is given them: read from the PTX, as the load does without a 12.4 driver.
  const sy::CustomKernel* kernels[] = {&bias_silu::forward_kernel(), &bias_silu::backward_kernel(),
                                       &test_kernels::scale_sign(), &test_kernels::row_sum(),
                                       &test_kernels::double_square()};
  for (const sy::CustomKernel* k : kernels) {
    const auto sizes = sy::cuda_impl::ptx_param_sizes(
        sy::cuda_impl::nvrtc_ptx(k->spec(), built_archs().front()), k->spec().cuda_entry);
    EXPECT_EQ(sizes.size(),
              k->spec().outputs.size() + k->spec().inputs.size() + (k->spec().params_bytes ? 1 : 0))
        << k->spec().name;
    EXPECT_NO_THROW(sy::cuda_impl::check_cuda_params(k->spec(), sizes)) << k->spec().name;
  }
  // A signature that forgot the parameter struct is refused at load, not
  // launched with the wrong arguments.
  sy::KernelSpec s = bias_silu::forward_kernel().spec();
  s.name = s.cuda_entry = "no_params";
  s.cuda =
      "extern \"C\" __global__ void no_params(float* y, const float* x, const float* b) {\n"
      "  y[threadIdx.x] = x[threadIdx.x] + b[0];\n"
      "}\n";
  const auto sizes = sy::cuda_impl::ptx_param_sizes(
      sy::cuda_impl::nvrtc_ptx(s, built_archs().front()), s.cuda_entry);
  ASSERT_EQ(sizes, (std::vector<size_t>{8, 8, 8}));
  try {
    sy::cuda_impl::check_cuda_params(s, sizes);
    FAIL() << "a missing parameter struct was expected to be refused";
  } catch (const sy::Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "[custom kernel no_params] expected its entry 'no_params' to take 3 pointers "
                  "(outputs, then inputs) and a parameter struct of 8 bytes, found 3 parameters "
                  "of 8, 8, 8 bytes"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaCustom, TheDeviceLoadsACubinForItsArchitectureElsePtxForAnEarlierOne) {
  using sy::cuda_impl::choose_cuda_target;
  const std::vector<int> known = {75, 80, 86, 87, 89, 90, 100, 120};
  auto is = [](sy::cuda_impl::CudaTarget t, int arch, bool cubin) {
    return t.arch == arch && t.cubin == cubin;
  };
  EXPECT_TRUE(is(choose_cuda_target(known, true, 9, 0), 90, true));     // H100
  EXPECT_TRUE(is(choose_cuda_target(known, true, 8, 6), 86, true));     // RTX 30
  EXPECT_TRUE(is(choose_cuda_target(known, true, 12, 1), 120, false));  // newer than NVRTC
  EXPECT_TRUE(is(choose_cuda_target(known, true, 8, 8), 87, false));    // between two it knows
  EXPECT_TRUE(is(choose_cuda_target(known, false, 9, 0), 90, false));   // an NVRTC without cubins
  EXPECT_EQ(choose_cuda_target(known, true, 7, 0).arch, 0);             // older than NVRTC's oldest
}

TEST(CudaCustom, NvrtcErrorsNameTheLineOfTheUsersSource) {
  ASSERT_TRUE(sy::cuda_impl::nvrtc_unavailable_reason().empty());
  sy::CustomKernel broken({.name = "broken_cuda",
                           .cuda = "extern \"C\" __global__ void broken_cuda(float* y) {\n"
                                   "  int i = threadIdx.x;\n"
                                   "  y[i] = undefined_name;\n"
                                   "}\n",
                           .inputs = {{"x"}},
                           .outputs = {{"y"}}});
  try {
    (void)sy::cuda_impl::nvrtc_ptx(broken.spec(), built_archs().front());
    FAIL() << "a compile error was expected";
  } catch (const sy::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[custom kernel broken_cuda]"), std::string::npos) << m;
    EXPECT_NE(m.find("broken_cuda.cu(3): error"), std::string::npos) << m;
    EXPECT_NE(m.find("undefined_name"), std::string::npos) << m;
  }
}
