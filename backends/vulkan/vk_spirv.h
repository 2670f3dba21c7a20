// SPDX-License-Identifier: MIT
// The SPIR-V modules compiled from shaders/*.comp at build time, embedded.
#pragma once
#include <cstddef>
#include <cstdint>

namespace switchyard::vk_impl {
struct SpirvModule {
  const char* name;  // file stem, plus "_sg" for the subgroup-arithmetic build
  const uint32_t* code;
  size_t words;
};
extern const SpirvModule kSpirvModules[];
extern const size_t kSpirvModuleCount;
}  // namespace switchyard::vk_impl
