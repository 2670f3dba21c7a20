// Run-time loading of the Vulkan loader (see vk_loader.h).
#include "vk_loader.h"

#include <dlfcn.h>

namespace switchyard::vk_impl {

Api vk;

bool load_loader(std::string& why) {
  static void* lib = nullptr;
  if (!lib) {
    for (const char* name :
         {"libvulkan.so.1", "libvulkan.so", "libvulkan.1.dylib", "libMoltenVK.dylib"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      const char* e = dlerror();
      why = std::string("the Vulkan loader (libvulkan.so.1) is not installed: ") +
            (e ? e : "dlopen failed") +
            " (Debian/Ubuntu: apt-get install libvulkan1 mesa-vulkan-drivers)";
      return false;
    }
  }
  vk.vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
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
