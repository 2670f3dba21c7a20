// The Vulkan backend: device facts, one submission and zero allocations per
// training step, out-of-memory, large transfers, bad input found on the
// device, and training that matches the CPU. ctest runs these in the
// zero-copy mode and again with SWITCHYARD_VK_FORCE_STAGING=1, all under the
// validation layer with synchronization validation.
#include <cstdlib>

#include "helpers.h"
#include "mlp.h"
#include "trainer.h"

using sy::Tensor;

namespace {

// The first Vulkan device, or skip (fail where ctest says Vulkan is required).
sy::Device* vulkan_or_skip() {
  for (auto& b : sy::backends()) {
    if (b.name != "vulkan") continue;
    if (b.available) return b.devices.front().get();
    const char* req = std::getenv("SWITCHYARD_REQUIRE_VULKAN");
    if (req && std::string(req) == "1") {
      ADD_FAILURE() << "SWITCHYARD_REQUIRE_VULKAN=1 but the Vulkan backend is unavailable: " << b.reason;
      return nullptr;
    }
    return nullptr;
  }
  return nullptr;
}

#define VULKAN_OR_SKIP(d)                                                          \
  sy::Device* d##_ptr = vulkan_or_skip();                                          \
  if (!d##_ptr) GTEST_SKIP() << "no Vulkan device: " << [] {                       \
    for (auto& b : sy::backends())                                                 \
      if (b.name == "vulkan") return b.reason;                                     \
    return std::string("backend not listed");                                      \
  }();                                                                             \
  sy::Device& d = *d##_ptr

std::string prop(const sy::Device& d, const std::string& key) {
  for (auto& [k, v] : d.info().properties)
    if (k == key) return v;
  return "";
}

}  // namespace

TEST(Vulkan, DeviceReportsItsProperties) {
  VULKAN_OR_SKIP(d);
  EXPECT_EQ(d.str(), "vulkan:0");
  EXPECT_FALSE(d.info().name.empty());
  EXPECT_GT(d.info().memory_bytes, 0u);
  for (const char* k : {"vendor", "driver", "api", "heaps", "subgroup", "max_storage_buffer", "memory"})
    EXPECT_FALSE(prop(d, k).empty()) << k;
  const char* staging = std::getenv("SWITCHYARD_VK_FORCE_STAGING");
  if (staging && std::string(staging) == "1") {
    EXPECT_EQ(prop(d, "memory"), "staging ring");
  }
}

TEST(Vulkan, AutoNeverPicksACpuTypeDevice) {
  VULKAN_OR_SKIP(d);
  bool gpu = false;
  for (auto* x : sy::devices())
    if ((x->info().backend == "vulkan" || x->info().backend == "cuda") && x->info().type != sy::DeviceType::cpu)
      gpu = true;
  if (d.info().type == sy::DeviceType::cpu && !gpu) {
    EXPECT_EQ(sy::device("auto").str(), "cpu");
  }
  EXPECT_EQ(&sy::device("vulkan"), &d) << "a CPU-type device can still be named";
}

TEST(Vulkan, ABadSettingFailsEveryUseWithTheSameMessage) {
  VULKAN_OR_SKIP(d);
  // Checked in a child process: the setting is read when the device is first used.
  if (std::getenv("SY_TEST_CHILD")) {
    for (int i = 0; i < 2; ++i)
      expect_error([&] { (void)(sy::ones({4}, d) + 1.f).to_vector<float>(); }, {"SWITCHYARD_VK_GEMM_TILE"});
    return;
  }
  std::string cmd = std::string("SY_TEST_CHILD=1 SWITCHYARD_VK_GEMM_TILE=1,2,3 ") +
                    ::testing::internal::GetArgvs()[0] +
                    " --gtest_filter=Vulkan.ABadSettingFailsEveryUseWithTheSameMessage > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "the child's checks failed: run " << cmd;
}
