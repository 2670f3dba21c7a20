// SPDX-License-Identifier: MIT
// Custom CUDA kernels at compile level, which needs no GPU: NVRTC compiles
// the sample's and the tests' kernels to PTX for every architecture this
// build targets, and a compile error names the line of the user's source.
// Their launches run in test_custom on cuda:0 where a GPU is present (and
// are skipped with the reason where not).
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
                                       &test_kernels::scale_sign(), &test_kernels::row_sum()};
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

TEST(CudaCustom, NvrtcWritesACubinForAnArchitectureItKnows) {
  ASSERT_TRUE(sy::cuda_impl::nvrtc_unavailable_reason().empty());
  // What a device of that compute capability loads (no PTX for its driver to read).
  const std::string cubin =
      sy::cuda_impl::nvrtc_compile(bias_silu::forward_kernel().spec(), built_archs().front(), true);
  EXPECT_EQ(cubin.rfind("\x7f"
                        "ELF",
                        0),
            0u)
      << "an ELF image";
  EXPECT_NE(cubin.find("bias_silu"), std::string::npos) << "its entry's name in the symbol table";
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
