// SPDX-License-Identifier: MIT
// The Vulkan instance and the facts of physical devices: creating the
// instance (portability enumeration, validation with synchronization checks),
// querying devices, picking memory types, and what `switchyard devices` shows.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "switchyard/backend/device.h"
#include "units.h"
#include "vk_loader.h"

namespace switchyard::vk_impl {

// SWITCHYARD_VK_* switches: set and not "0".
bool env_on(const char* name);
std::string version_str(uint32_t vk_version);
bool has_ext(const std::vector<VkExtensionProperties>& v, const char* name);

struct Instance {
  VkInstance inst = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  bool validation = false;
  // VK_EXT_debug_utils is enabled (wherever the instance lists it: the
  // loader's own, a validation or capture layer's): objects are named and
  // launches labelled, for validation messages, RenderDoc and Nsight.
  bool debug_utils = false;
  // A device whose work never finished was left undestroyed (VulkanDevice::
  // abandon): the instance, its parent, must outlive it, so it is not
  // destroyed either.
  bool abandoned_device = false;
  uint32_t api = VK_API_VERSION_1_1;  // the instance's API version
  std::mutex mu;
  std::vector<uint64_t*> counters;  // devices' Counters::validation_messages
  ~Instance();
  void shutdown();
};

// Loads the loader and creates the instance; nullptr and `why` on failure.
std::shared_ptr<Instance> create_instance(std::string& why);

struct Physical {
  VkPhysicalDevice pd = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maint3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  bool has_driver_props = false;
  uint32_t api = 0;  // usable API version: min(device, instance)
  VkPhysicalDeviceMemoryProperties mem{};
  VkPhysicalDeviceFeatures features{};
  std::vector<VkQueueFamilyProperties> queues;
  std::vector<VkExtensionProperties> exts;
  uint32_t queue_family = 0;  // choose_queue_family's; UINT32_MAX: none (queue_why says why)
  std::string queue_why;
  bool subgroup_arith = false;
  // SMs, CUs or shader cores, as the driver reports them
  // (VK_NV_shader_sm_builtins, VK_AMD_shader_core_properties[2],
  // VK_ARM_shader_core_builtins), else from vk_gemm.h's table; 0: unknown.
  // units_source says which.
  uint32_t compute_units = 0;
  std::string units_source;
  // Memory facts (vk_memory_policy.h). Under SWITCHYARD_VK_SIMULATE, props'
  // type and nonCoherentAtomSize and `mem` are the simulated device's, and
  // real_type maps each simulated memory type to the driver's.
  bool budget_ext = false;  // VK_EXT_memory_budget
  std::string simulated;    // the profile's name, or ""
  uint32_t real_type[VK_MAX_MEMORY_TYPES] = {};
  uint64_t sim_budget[VK_MAX_MEMORY_HEAPS] = {};  // simulated heaps' budgets
  uint32_t emulate_noncoherent = 0;  // simulated non-coherent types, emulated by a shadow copy
};

Physical query(VkPhysicalDevice pd, uint32_t instance_api);
// The queue family Switchyard submits to: one with compute queues, a
// compute-only (async-compute) family first, since it runs beside a
// display's graphics work on its own hardware queue on AMD, NVIDIA and
// Intel; then one whose queues write timestamps (the profiler's); then the
// lowest index. SWITCHYARD_VK_QUEUE_FAMILY=N names one instead. UINT32_MAX
// and `why` when there is none (or N is not one).
uint32_t choose_queue_family(const std::vector<VkQueueFamilyProperties>& families,
                             std::string& why);
// Why this device cannot run Switchyard's shaders (which need
// `storage_buffers` per stage), or "".
std::string unsupported(const Physical& p, uint32_t storage_buffers);
struct MemoryPolicy;
DeviceInfo make_info(const Physical& p, int index, const MemoryPolicy& mp);

}  // namespace switchyard::vk_impl
