// SPDX-License-Identifier: MIT
// Main for every test program: fails the run if any Vulkan device reported a
// validation-layer message (ctest also fails a test whose output contains
// "[vulkan validation]", which catches messages printed at exit).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "switchyard/backend/device.h"
#include "switchyard/switchyard.h"
#include "test_env.h"

#ifndef SWITCHYARD_TEST_ENV
#define SWITCHYARD_TEST_ENV ""
#endif

// Before any static initializer (test parameters list the devices, which
// builds the registry): the environment the tests run in, from
// tests/CMakeLists.txt, without overriding what the caller set.
__attribute__((constructor(101))) static void set_test_environment() {
  std::string env = SWITCHYARD_TEST_ENV;
  for (size_t s = 0; s < env.size();) {
    size_t e = env.find(',', s);
    if (e == std::string::npos) e = env.size();
    std::string kv = env.substr(s, e - s);
    if (size_t eq = kv.find('='); eq != std::string::npos)
      set_env(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), /*overwrite=*/false);
    s = e + 1;
  }
}

namespace {
// SWITCHYARD_TEST_SUBGROUP=N (the vulkan_subgroup ctest variants): the run is
// only worth its name if vulkan:0 really has subgroups of N invocations with
// subgroup arithmetic, so a driver that ignores the width it was asked for
// fails the run before any test runs.
class ExpectedSubgroupSize : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* want = std::getenv("SWITCHYARD_TEST_SUBGROUP");
    if (!want || !*want) return;
    std::string found = "(no vulkan:0)";
    for (auto* d : switchyard::devices())
      if (d->str() == "vulkan:0")
        for (auto& [k, v] : d->info().properties)
          if (k == "subgroup") found = v;
    if (found != std::string(want) + " (arithmetic)")
      GTEST_FAIL() << "SWITCHYARD_TEST_SUBGROUP=" << want << ": expected vulkan:0 to report "
                   << "subgroup " << want << " (arithmetic), found " << found;
  }
};

class NoValidationMessages : public ::testing::Environment {
 public:
  void TearDown() override {
    for (auto* d : switchyard::devices())
      EXPECT_EQ(switchyard::backend_of(*d).counters().validation_messages, 0u)
          << d->str() << " reported validation messages (printed above as [vulkan validation])";
  }
};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new ExpectedSubgroupSize);
  ::testing::AddGlobalTestEnvironment(new NoValidationMessages);
  return RUN_ALL_TESTS();
}
