// SPDX-License-Identifier: MIT
// Run-time loading of the Vulkan loader (see vk_loader.h).
#include "vk_loader.h"

#include <atomic>
#include <cstdlib>

#include "switchyard/backend/platform.h"

namespace switchyard::vk_impl {

Api vk;

// The names the platform's Vulkan loader goes by, the usual one first.
#if defined(__APPLE__)
constexpr const char* kLoaderNames[] = {"libvulkan.1.dylib", "libvulkan.dylib",
                                        "libMoltenVK.dylib"};
constexpr const char* kInstallHint = "install the Vulkan SDK or MoltenVK";
#elif defined(_WIN32)
constexpr const char* kLoaderNames[] = {"vulkan-1.dll"};
constexpr const char* kInstallHint = "it comes with the GPU vendor's driver";
#else
constexpr const char* kLoaderNames[] = {"libvulkan.so.1", "libvulkan.so"};
constexpr const char* kInstallHint =
    "Debian/Ubuntu: apt-get install libvulkan1 mesa-vulkan-drivers";
#endif

bool load_loader(std::string& why) {
  static void* lib = nullptr;
  if (!lib) {
    std::string first_error;  // the usual name's: the one worth reporting
    for (const char* name : kLoaderNames) {
      std::string error;
      if ((lib = platform::open_library(name, &error))) break;
      if (first_error.empty()) first_error = error;
    }
    if (!lib) {
      why = std::string("the Vulkan loader (") + kLoaderNames[0] +
            ") is not installed: " + first_error + " (" + kInstallHint + ")";
      return false;
    }
  }
  vk.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(
      platform::library_symbol(lib, "vkGetInstanceProcAddr"));
  if (!vk.vkGetInstanceProcAddr) {
    why = "the Vulkan loader has no vkGetInstanceProcAddr";
    return false;
  }
#define SY_VK_LOAD_GLOBAL(f) \
  vk.f = reinterpret_cast<PFN_##f>(vk.vkGetInstanceProcAddr(nullptr, #f));
  SY_VK_GLOBAL_FUNCS(SY_VK_LOAD_GLOBAL)
#undef SY_VK_LOAD_GLOBAL
  if (!vk.vkCreateInstance || !vk.vkEnumerateInstanceExtensionProperties) {
    why = "the Vulkan loader does not provide vkCreateInstance";
    return false;
  }
  return true;
}

namespace {

// The functions each injectable result may come from (the error codes the
// specification lists for them).
// clang-format off
#define SY_VK_LOST_FUNCS(X) \
  X(vkQueueSubmit) X(vkQueueWaitIdle) X(vkDeviceWaitIdle) X(vkWaitForFences) \
  X(vkGetFenceStatus) X(vkGetQueryPoolResults)
#define SY_VK_OOM_FUNCS(X) \
  SY_VK_LOST_FUNCS(X) \
  X(vkAllocateMemory) X(vkMapMemory) X(vkCreateBuffer) X(vkBindBufferMemory) \
  X(vkCreateFence) X(vkResetFences) X(vkCreateCommandPool) X(vkAllocateCommandBuffers) \
  X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkResetCommandBuffer) \
  X(vkCreateQueryPool) X(vkCreateShaderModule) X(vkCreateComputePipelines) \
  X(vkCreatePipelineLayout) X(vkCreateDescriptorSetLayout) X(vkCreateDescriptorPool) \
  X(vkAllocateDescriptorSets) X(vkCreatePipelineCache) X(vkGetPipelineCacheData)
// clang-format on

struct Fault {
  VkResult result = VK_SUCCESS;
  uint64_t nth = 0;
  std::atomic<uint64_t> calls{0};
  std::atomic<bool> fired{false};
  std::atomic<const char*> function{""};
};
Fault g_fault;

// True when this call is the one to fail.
bool fault_now(const char* fn) {
  uint64_t n = g_fault.calls.fetch_add(1) + 1;
  if (g_fault.nth == 0 || n != g_fault.nth) return false;
  g_fault.function = fn;
  g_fault.fired = true;
  return true;
}

// One wrapper per function (the member pointer makes each distinct).
template <auto Member, class F>
struct Wrap;
template <auto Member, class... A>
struct Wrap<Member, VkResult(VKAPI_PTR*)(A...)> {
  static inline VkResult(VKAPI_PTR* real)(A...) = nullptr;
  static inline const char* name = "";
  static VkResult VKAPI_PTR call(A... a) {
    if (fault_now(name)) return g_fault.result;
    return real(a...);
  }
};

void install_faults() {
  // Each load of the table is wrapped again (the counts go on).
  const char* e = std::getenv("SWITCHYARD_VK_FAULT");
  if (!e || !*e) return;
  std::string spec(e);
  auto colon = spec.rfind(':');
  std::string what = spec.substr(0, colon);
  g_fault.nth =
      colon == std::string::npos ? 0 : std::strtoull(spec.c_str() + colon + 1, nullptr, 10);
  bool lost = what == "VK_ERROR_DEVICE_LOST";
  g_fault.result = lost                                    ? VK_ERROR_DEVICE_LOST
                   : what == "VK_ERROR_OUT_OF_HOST_MEMORY" ? VK_ERROR_OUT_OF_HOST_MEMORY
                                                           : VK_ERROR_OUT_OF_DEVICE_MEMORY;
#define SY_VK_WRAP(f)                 \
  {                                   \
    using W = Wrap<&Api::f, PFN_##f>; \
    W::real = vk.f;                   \
    W::name = #f;                     \
    vk.f = &W::call;                  \
  }
  if (lost) {
    SY_VK_LOST_FUNCS(SY_VK_WRAP)
  } else {
    SY_VK_OOM_FUNCS(SY_VK_WRAP)
  }
#undef SY_VK_WRAP
}

}  // namespace

FaultStats fault_stats() {
  return {g_fault.calls.load(), g_fault.fired.load(), g_fault.function.load(), g_fault.result};
}

bool load_instance(VkInstance inst, std::string& why) {
#define SY_VK_LOAD(f)                                                                    \
  vk.f = reinterpret_cast<PFN_##f>(vk.vkGetInstanceProcAddr(inst, #f));                  \
  if (!vk.f) {                                                                           \
    why = "the Vulkan loader does not provide " #f " (a Vulkan 1.1 loader is required)"; \
    return false;                                                                        \
  }
  SY_VK_INSTANCE_FUNCS(SY_VK_LOAD)
#undef SY_VK_LOAD
#define SY_VK_LOAD_OPT(f) vk.f = reinterpret_cast<PFN_##f>(vk.vkGetInstanceProcAddr(inst, #f));
  SY_VK_OPTIONAL_FUNCS(SY_VK_LOAD_OPT)
#undef SY_VK_LOAD_OPT
  install_faults();
  return true;
}

const char* result_name(VkResult r) {
  switch (r) {
// clang-format off
#define SY_CASE(x) case x: return #x;
    SY_CASE(VK_SUCCESS) SY_CASE(VK_NOT_READY) SY_CASE(VK_TIMEOUT) SY_CASE(VK_INCOMPLETE)
    SY_CASE(VK_ERROR_OUT_OF_HOST_MEMORY) SY_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    SY_CASE(VK_ERROR_INITIALIZATION_FAILED) SY_CASE(VK_ERROR_DEVICE_LOST)
    SY_CASE(VK_ERROR_MEMORY_MAP_FAILED) SY_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    SY_CASE(VK_ERROR_EXTENSION_NOT_PRESENT) SY_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    SY_CASE(VK_ERROR_INCOMPATIBLE_DRIVER) SY_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    SY_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED) SY_CASE(VK_ERROR_FRAGMENTED_POOL)
    SY_CASE(VK_ERROR_UNKNOWN) SY_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    SY_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE) SY_CASE(VK_ERROR_FRAGMENTATION)
#undef SY_CASE
        // clang-format on
        default : return "VkResult(unknown)";
  }
}

}  // namespace switchyard::vk_impl
