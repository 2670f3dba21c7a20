// SPDX-License-Identifier: MIT
// Vulkan entry points, loaded at run time from the system's loader
// (libvulkan.so.1). Linking against libvulkan would stop a binary from
// starting on a machine without it; opening it here lets the backend report
// "unavailable" with the reason instead.
#pragma once
#include <vulkan/vulkan.h>

#include <string>

namespace switchyard::vk_impl {

#define SY_VK_GLOBAL_FUNCS(X)               \
  X(vkCreateInstance)                       \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkEnumerateInstanceLayerProperties)     \
  X(vkEnumerateInstanceVersion)

#define SY_VK_INSTANCE_FUNCS(X)               \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures)              \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceMemoryProperties2)     \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkDestroyDevice)                          \
  X(vkGetDeviceQueue)                         \
  X(vkQueueSubmit)                            \
  X(vkQueueWaitIdle)                          \
  X(vkDeviceWaitIdle)                         \
  X(vkAllocateMemory)                         \
  X(vkFreeMemory)                             \
  X(vkMapMemory)                              \
  X(vkFlushMappedMemoryRanges)                \
  X(vkInvalidateMappedMemoryRanges)           \
  X(vkUnmapMemory)                            \
  X(vkCreateBuffer)                           \
  X(vkDestroyBuffer)                          \
  X(vkGetBufferMemoryRequirements)            \
  X(vkBindBufferMemory)                       \
  X(vkCreateFence)                            \
  X(vkDestroyFence)                           \
  X(vkResetFences)                            \
  X(vkGetFenceStatus)                         \
  X(vkWaitForFences)                          \
  X(vkCreateCommandPool)                      \
  X(vkDestroyCommandPool)                     \
  X(vkAllocateCommandBuffers)                 \
  X(vkFreeCommandBuffers)                     \
  X(vkBeginCommandBuffer)                     \
  X(vkEndCommandBuffer)                       \
  X(vkResetCommandBuffer)                     \
  X(vkCmdCopyBuffer)                          \
  X(vkCmdPipelineBarrier)                     \
  X(vkCmdBindPipeline)                        \
  X(vkCmdBindDescriptorSets)                  \
  X(vkCmdPushConstants)                       \
  X(vkCmdDispatch)                            \
  X(vkCreateQueryPool)                        \
  X(vkDestroyQueryPool)                       \
  X(vkCmdResetQueryPool)                      \
  X(vkCmdWriteTimestamp)                      \
  X(vkGetQueryPoolResults)                    \
  X(vkCreateShaderModule)                     \
  X(vkDestroyShaderModule)                    \
  X(vkCreateComputePipelines)                 \
  X(vkDestroyPipeline)                        \
  X(vkCreatePipelineLayout)                   \
  X(vkDestroyPipelineLayout)                  \
  X(vkCreateDescriptorSetLayout)              \
  X(vkDestroyDescriptorSetLayout)             \
  X(vkCreateDescriptorPool)                   \
  X(vkDestroyDescriptorPool)                  \
  X(vkAllocateDescriptorSets)                 \
  X(vkUpdateDescriptorSets)                   \
  X(vkFreeDescriptorSets)                     \
  X(vkCreatePipelineCache)                    \
  X(vkDestroyPipelineCache)                   \
  X(vkGetPipelineCacheData)                   \
  X(vkGetDeviceProcAddr)

// VK_EXT_debug_utils (instance-level: the loader provides them for every
// device once the instance enables the extension).
#define SY_VK_OPTIONAL_FUNCS(X)      \
  X(vkCreateDebugUtilsMessengerEXT)  \
  X(vkDestroyDebugUtilsMessengerEXT) \
  X(vkSetDebugUtilsObjectNameEXT)    \
  X(vkCmdBeginDebugUtilsLabelEXT)    \
  X(vkCmdEndDebugUtilsLabelEXT)

struct Api {
#define SY_VK_DECL(f) PFN_##f f = nullptr;
  SY_VK_DECL(vkGetInstanceProcAddr)
  SY_VK_GLOBAL_FUNCS(SY_VK_DECL)
  SY_VK_INSTANCE_FUNCS(SY_VK_DECL)
  SY_VK_OPTIONAL_FUNCS(SY_VK_DECL)
#undef SY_VK_DECL
};

// The one table, filled by load_loader() and load_instance().
extern Api vk;

// Opens libvulkan; on failure returns false and sets `why`.
bool load_loader(std::string& why);
// Resolves the instance-level (and, through the loader's trampolines,
// device-level) functions. Returns false and sets `why` when one is missing.
bool load_instance(VkInstance inst, std::string& why);

// Fault injection, for tests: SWITCHYARD_VK_FAULT=<RESULT>:<N> makes the
// N-th call (counted from the start of the process) of a Vulkan function
// that the specification lets return RESULT return it without running.
// RESULT is VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_OUT_OF_HOST_MEMORY or
// VK_ERROR_DEVICE_LOST; N = 0 only counts. Installed by load_instance().
struct FaultStats {
  uint64_t calls = 0;  // calls counted so far
  bool fired = false;
  const char* function = "";     // the one that failed
  VkResult result = VK_SUCCESS;  // what it returned instead
};
FaultStats fault_stats();

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and friends.
const char* result_name(VkResult r);

}  // namespace switchyard::vk_impl
