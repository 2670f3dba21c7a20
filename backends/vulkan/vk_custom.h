// SPDX-License-Identifier: MIT
// Custom kernels on Vulkan (switchyard/custom.h): the user's GLSL behind
// Switchyard's prelude, compiled at run time by libshaderc (linked
// statically where the build found it: backends/vulkan/CMakeLists.txt),
// validated by SPIRV-Tools, cached by the runtime's compile cache. No Vulkan
// calls here: Pipelines::create makes the pipeline from the SPIR-V.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "switchyard/custom.h"

namespace switchyard::vk_impl {

// What Switchyard puts in front of the user's GLSL: #version 450, the
// subgroup extensions, the workgroup size (SY_WG_X/Y/Z and the layout), the
// SY_INPUT, SY_OUTPUT and SY_PARAMS macros, and `#line 1`, so the
// compiler's messages name lines of the user's source.
std::string glsl_prelude(const KernelSpec& spec);

// SPIR-V for `spec` on a device of Vulkan version `api_version`
// (VK_MAKE_API_VERSION; the target environment is at most Vulkan 1.3),
// optimized for performance, from the compile cache or libshaderc. Throws
// Error with the compiler's messages for a compile error, and says why
// when libshaderc cannot be opened.
std::shared_ptr<const std::vector<uint32_t>> compile_glsl(const KernelSpec& spec,
                                                          uint32_t api_version);

// What a device runs, for check_custom_module (plain values: tests fake them).
struct CustomDeviceCaps {
  std::string device;                                  // for messages: "vulkan:0"
  bool float64 = false, int64 = false, int16 = false;  // features enabled at creation
  bool subgroup_in_compute = false;
  uint32_t subgroup_ops = 0;  // VkSubgroupFeatureFlags
  uint64_t max_shared_bytes = 16384;
};

// Checks compiled SPIR-V against the spec and the device before a pipeline
// is made of it (vk_custom_check.cpp): bindings only 0..arguments-1 and 5
// (SY_PARAMS), all in set 0 and all buffers; inputs read-only (hazards come
// from the declared roles, so a written input would race); the parameter
// block within params_bytes after its std140 layout; capabilities the device
// enabled (Float64, Int64, Int16, its subgroup operations); shared memory
// within maxComputeSharedMemorySize. Throws Error or DeviceLimit naming the
// kernel, what was expected and what was found.
void check_custom_module(const KernelSpec& spec, const std::vector<uint32_t>& spirv,
                         const CustomDeviceCaps& device);

// Empty when libshaderc was opened, else why not (tests, messages).
std::string shaderc_unavailable_reason();

}  // namespace switchyard::vk_impl
