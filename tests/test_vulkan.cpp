// The Vulkan backend's own checks: device facts, how `auto` treats a
// CPU-type Vulkan device, and settings read from the environment. The checks
// every GPU backend shares (one submission per step, out-of-memory, large
// transfers, bad labels, pinned memory, training parity) are in test_gpu.cpp.
// ctest runs these under the validation layer, zero-copy and forced-staging.
#include <cstdlib>

#include "helpers.h"

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
