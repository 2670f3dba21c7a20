// SPDX-License-Identifier: MIT
// The Vulkan backend's own checks: device facts, how `auto` treats a
// CPU-type Vulkan device, and settings read from the environment. The checks
// every GPU backend shares (one submission per step, out-of-memory, large
// transfers, bad labels, pinned memory, training parity) are in test_gpu.cpp.
// ctest runs these under the validation layer, zero-copy and forced-staging.
#include <cstdlib>

#include "helpers.h"
#include "switchyard/profile.h"

// The first Vulkan device, or skip with the reason (a failure where
// SWITCHYARD_REQUIRE_VULKAN=1, as ctest sets where the backend is built).
#define VULKAN_OR_SKIP(d)            \
  SKIP_UNLESS_AVAILABLE("vulkan:0"); \
  sy::BackendDevice& d = sy::backend_device("vulkan:0")

TEST(Vulkan, DeviceReportsItsProperties) {
  VULKAN_OR_SKIP(d);
  EXPECT_EQ(d.str(), "vulkan:0");
  EXPECT_FALSE(d.info().name.empty());
  EXPECT_GT(d.info().memory_bytes, 0u);
  for (const char* k :
       {"vendor", "driver", "api", "heaps", "subgroup", "max_storage_buffer", "memory"})
    EXPECT_FALSE(device_property(d, k).empty()) << k;
  const char* staging = std::getenv("SWITCHYARD_VK_FORCE_STAGING");
  if (staging && std::string(staging) == "1") {
    EXPECT_EQ(device_property(d, "memory"), "staging ring");
  }
}

TEST(Vulkan, AutoNeverPicksACpuTypeDevice) {
  VULKAN_OR_SKIP(d);
  bool gpu = false;
  for (auto* x : sy::devices())
    if ((x->info().backend == "vulkan" || x->info().backend == "cuda") &&
        x->info().type != sy::DeviceType::cpu)
      gpu = true;
  if (d.info().type == sy::DeviceType::cpu && !gpu) {
    EXPECT_EQ(sy::backend_device("auto").str(), "cpu");
  }
  EXPECT_EQ(&sy::backend_device("vulkan"), &d) << "a CPU-type device can still be named";
}

TEST(Vulkan, ABadSettingFailsEveryUseWithTheSameMessage) {
  VULKAN_OR_SKIP(d);
  // Checked in a child process: the setting is read when the device is first used.
  if (std::getenv("SY_TEST_CHILD")) {
    for (int i = 0; i < 2; ++i)
      expect_error([&] { (void)(sy::ones({4}, d) + 1.f).to_vector<float>(); },
                   {"SWITCHYARD_VK_GEMM_TILE"});
    return;
  }
  std::string cmd =
      std::string("SY_TEST_CHILD=1 SWITCHYARD_VK_GEMM_TILE=1,2,3 ") +
      ::testing::internal::GetArgvs()[0] +
      " --gtest_filter=Vulkan.ABadSettingFailsEveryUseWithTheSameMessage > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "the child's checks failed: run " << cmd;
}

// Mesa's llvmpipe ends a shader invocation's loops after 65535 iterations in
// all, without an error: a GEMM with K above about 15,000 came out wrong
// there. The backend splits such GEMMs along K (parts accumulate in C; the
// bias goes in once, the activation at the end) and refuses other launches
// whose loops would run past the budget, naming the kernel. Checked on this
// device's own budget, and in a child with a small budget
// (SWITCHYARD_VK_LOOP_BUDGET) so every split path runs on small sizes.
static void check_loop_budget(sy::BackendDevice& d, int64_t long_k, int64_t refused_len) {
  auto close = [](const sy::Tensor& got, const sy::Tensor& want, const char* what) {
    auto g = got.to(sy::cpu()).to_vector<float>(), w = want.to_vector<float>();
    ASSERT_EQ(g.size(), w.size()) << what;
    float scale = 0;
    for (float v : w) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_NEAR(g[i], w[i], 1e-5f * scale + 1e-6f) << what << " at " << i;
  };
  sy::manual_seed(7);
  // linear: Y = X W^T + b through the fused GEMM, then relu; X^T G, the
  // shape of a weight gradient (K = the batch); a batched product.
  sy::Tensor x = sy::randn({5, long_k}), w = sy::randn({7, long_k}), b = sy::randn({7});
  close(sy::relu(sy::linear(x.to(d), w.to(d), b.to(d))), sy::relu(sy::linear(x, w, b)),
        "relu(linear)");
  sy::Tensor xt = sy::randn({long_k, 6}), g = sy::randn({long_k, 3});
  close(sy::matmul(xt.to(d), g.to(d), true, false), sy::matmul(xt, g, true, false), "X^T G");
  sy::Tensor a3 = sy::randn({2, 4, long_k}), b3 = sy::randn({2, long_k, 5});
  close(sy::bmm(a3.to(d), b3.to(d)), sy::bmm(a3, b3), "bmm");
  if (refused_len > 0) {
    sy::Tensor col = sy::rand({refused_len, 3});
    expect_error([&] { (void)sy::sum(col.to(d), 0).to_vector<float>(); },
                 {"reduce_sum", "loop iterations", d.str(), "split the tensor"});
    EXPECT_THROW((void)sy::sum(col.to(d), 0).to_vector<float>(), sy::DeviceLimit);
  }
  // The device goes on working.
  close(sy::sum(sy::ones({100, 3}, d), 0), sy::full({3}, 100.f), "sum after");
  // The profiler counts a split GEMM once, as the Program has it.
  namespace prof = sy::profile;
  prof::clear();
  prof::set_enabled(true);
  const uint64_t before = d.counters().launches_by_kernel[size_t(sy::Kernel::gemm)];
  close(sy::matmul(xt.to(d), g.to(d), true, false), sy::matmul(xt, g, true, false), "profiled");
  d.synchronize();
  const uint64_t launched = d.counters().launches_by_kernel[size_t(sy::Kernel::gemm)] - before;
  uint64_t events = 0;
  for (const prof::Event& e : prof::events())
    events += e.track == prof::Track::kernel && e.device == d.str() && e.name == "gemm";
  prof::set_enabled(false);
  prof::clear();
  EXPECT_EQ(launched, 1u);
  EXPECT_EQ(events, launched) << "one kernel event per launch";
}

TEST(Vulkan, LongLoopsAreSplitOrRefusedNeverCutShort) {
  VULKAN_OR_SKIP(d);
  if (std::getenv("SY_TEST_CHILD")) {
    check_loop_budget(d, 1000, 5000);  // parts of K = 336 (gemm_k_part in vk_launch.cpp)
    return;
  }
  const bool llvmpipe = d.info().name.rfind("llvmpipe", 0) == 0;
  check_loop_budget(d, 40000, llvmpipe ? 70000 : 0);
  std::string cmd =
      std::string("SY_TEST_CHILD=1 SWITCHYARD_VK_LOOP_BUDGET=4096 ") +
      ::testing::internal::GetArgvs()[0] +
      " --gtest_filter=Vulkan.LongLoopsAreSplitOrRefusedNeverCutShort > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "the child's checks failed: run " << cmd;
}
