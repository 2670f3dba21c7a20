// SPDX-License-Identifier: MIT
// The Vulkan instance and physical-device facts (see vk_instance.h).
#include "vk_instance.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "switchyard/error.h"
#include "switchyard/settings.h"
#include "vk_gemm.h"
#include "vk_memory_policy.h"

namespace switchyard::vk_impl {

using detail::cat;

bool env_on(const char* name) {
  const char* e = std::getenv(name);
  return e && *e && std::string(e) != "0";
}

namespace {

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%04x", v);
  return b;
}

}  // namespace

namespace {

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x10DE:
      return "NVIDIA";
    case 0x1002:
      return "AMD";
    case 0x8086:
      return "Intel";
    case 0x106B:
      return "Apple";
    case 0x13B5:
      return "ARM";
    case 0x5143:
      return "Qualcomm";
    case 0x1010:
      return "Imagination";
    case 0x10005:
      return "Mesa";
    default:
      return hex(id);
  }
}

}  // namespace

std::string version_str(uint32_t v) {
  return cat(VK_API_VERSION_MAJOR(v), ".", VK_API_VERSION_MINOR(v), ".", VK_API_VERSION_PATCH(v));
}

// ---- instance -----------------------------------------------------------------

namespace {

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                             VkDebugUtilsMessageTypeFlagsEXT,
                                             const VkDebugUtilsMessengerCallbackDataEXT* data,
                                             void* user) {
  if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) return VK_FALSE;
  bool outside = false;
  if (auto* in = static_cast<Instance*>(user)) {
    std::lock_guard lock(in->mu);
    outside = in->counters.empty();
    for (uint64_t* c : in->counters)
      std::atomic_ref<uint64_t>(*c).fetch_add(1, std::memory_order_relaxed);
  }
  // Emitted outside the lock: the app's handler may take locks of its own.
  try {
    // The layer names the objects (ours are named, Context::set_name); the
    // launch it happened in is the command-buffer label open then (the
    // backend opens one per launch, never nested).
    std::string where;
    for (uint32_t i = 0; data && i < data->cmdBufLabelCount; ++i)
      if (const char* l = data->pCmdBufLabels[i].pLabelName)
        where += cat(where.empty() ? " [in launch: " : "; ", l);
    if (!where.empty()) where += "]";
    emit_message(cat("[vulkan validation] ", data && data->pMessage ? data->pMessage : "?", where));
  } catch (...) {  // no memory for the message: counted, not printed
  }
  if (outside) emit_message("[vulkan validation] (outside any device)");
  return VK_FALSE;
}

}  // namespace

Instance::~Instance() { shutdown(); }

void Instance::shutdown() {
  // The messenger goes in any case (its user data is this object); the
  // instance stays while an abandoned device, its child, lives.
  if (messenger && vk.vkDestroyDebugUtilsMessengerEXT)
    vk.vkDestroyDebugUtilsMessengerEXT(inst, messenger, nullptr);
  messenger = VK_NULL_HANDLE;
  if (abandoned_device) return;
  if (inst) vk.vkDestroyInstance(inst, nullptr);
  inst = VK_NULL_HANDLE;
}

bool has_ext(const std::vector<VkExtensionProperties>& v, const char* name) {
  return std::any_of(v.begin(), v.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

std::shared_ptr<Instance> create_instance(std::string& why) {
  if (!load_loader(why)) return nullptr;
  uint32_t n = 0;
  vk.vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vk.vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data());

  auto in = std::make_shared<Instance>();
  std::vector<const char*> enable;
  VkInstanceCreateFlags flags = 0;
  // MoltenVK and other non-conformant layers are only listed when asked for.
  if (has_ext(exts, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    enable.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  if (has_ext(exts, "VK_KHR_get_physical_device_properties2"))
    enable.push_back("VK_KHR_get_physical_device_properties2");

  // SWITCHYARD_VK_VALIDATION=1: the Khronos validation layer with
  // synchronization validation; every message is printed and counted.
  std::vector<const char*> layers;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkDebugUtilsMessengerCreateInfoEXT dbg{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  const void* next = nullptr;
  if (env_on("SWITCHYARD_VK_VALIDATION")) {
    uint32_t nl = 0;
    vk.vkEnumerateInstanceLayerProperties(&nl, nullptr);
    std::vector<VkLayerProperties> ls(nl);
    vk.vkEnumerateInstanceLayerProperties(&nl, ls.data());
    bool found = std::any_of(ls.begin(), ls.end(), [](const VkLayerProperties& l) {
      return std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0;
    });
    if (!found) {
      why =
          "SWITCHYARD_VK_VALIDATION=1 but the layer VK_LAYER_KHRONOS_validation is not installed "
          "(apt-get install vulkan-validationlayers)";
      return nullptr;
    }
    layers.push_back("VK_LAYER_KHRONOS_validation");
    in->debug_utils = true;  // the layer provides it
    enable.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = &sync;
    dbg.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    dbg.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    dbg.pfnUserCallback = on_validation;
    dbg.pUserData = in.get();
    features.pNext = &dbg;
    next = &features;
    in->validation = true;
  }

  in->debug_utils = in->debug_utils || has_ext(exts, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  if (in->debug_utils) enable.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "switchyard";
  app.pEngineName = "switchyard";
  // The highest version both the loader and Switchyard know (1.3): a
  // device's usable version is the lower of this and its own.
  uint32_t loader = VK_API_VERSION_1_0;
  if (vk.vkEnumerateInstanceVersion) vk.vkEnumerateInstanceVersion(&loader);
  in->api = std::min<uint32_t>(loader, VK_API_VERSION_1_3);
  app.apiVersion = in->api;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pNext = next;
  ci.flags = flags;
  ci.pApplicationInfo = &app;
  ci.enabledExtensionCount = uint32_t(enable.size());
  ci.ppEnabledExtensionNames = enable.data();
  ci.enabledLayerCount = uint32_t(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  if (VkResult r = vk.vkCreateInstance(&ci, nullptr, &in->inst); r != VK_SUCCESS) {
    in->inst = VK_NULL_HANDLE;
    why = cat("vkCreateInstance failed with ", result_name(r),
              r == VK_ERROR_INCOMPATIBLE_DRIVER
                  ? " (no Vulkan driver found: install mesa-vulkan-drivers "
                    "or your GPU vendor's driver)"
                  : "");
    return nullptr;
  }
  if (!load_instance(in->inst, why)) return nullptr;
  if (in->validation && vk.vkCreateDebugUtilsMessengerEXT)
    vk.vkCreateDebugUtilsMessengerEXT(in->inst, &dbg, nullptr, &in->messenger);
  return in;
}

// ---- physical-device facts --------------------------------------------------------

Physical query(VkPhysicalDevice pd, uint32_t instance_api) {
  Physical p;
  p.pd = pd;
  uint32_t n = 0;
  vk.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  p.exts.resize(n);
  vk.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, p.exts.data());
  vk.vkGetPhysicalDeviceProperties(pd, &p.props);
  p.api = std::min(p.props.apiVersion, instance_api);
  p.has_driver_props = p.api >= VK_API_VERSION_1_2 || has_ext(p.exts, "VK_KHR_driver_properties");
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &p.subgroup;
  p.subgroup.pNext = &p.maint3;
  if (p.has_driver_props) p.maint3.pNext = &p.driver;
  // The compute units, from whichever vendor extension the device lists
  // (property structures need the extension supported, not enabled).
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD amd{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  VkPhysicalDeviceShaderCoreProperties2AMD amd2{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_2_AMD};
  VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM arm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_PROPERTIES_ARM};
  void** tail = p.has_driver_props ? &p.driver.pNext : &p.maint3.pNext;
  auto chain = [&](const char* ext, auto& s) {
    if (!has_ext(p.exts, ext)) return false;
    *tail = &s;
    tail = &s.pNext;
    return true;
  };
  const bool has_sm = chain("VK_NV_shader_sm_builtins", sm);
  const bool has_amd = chain("VK_AMD_shader_core_properties", amd);
  const bool has_amd2 = chain("VK_AMD_shader_core_properties2", amd2);
  const bool has_arm = chain("VK_ARM_shader_core_builtins", arm);
  vk.vkGetPhysicalDeviceProperties2(pd, &p2);
  // No chain left behind: its structures are this function's locals and
  // the Physical's own members (copies of a Physical would point into it).
  p.subgroup.pNext = p.maint3.pNext = p.driver.pNext = nullptr;
  if (has_sm && sm.shaderSMCount) {
    p.compute_units = sm.shaderSMCount, p.units_source = "VK_NV_shader_sm_builtins";
  } else if (has_amd2 && amd2.activeComputeUnitCount) {
    p.compute_units = amd2.activeComputeUnitCount;
    p.units_source = "VK_AMD_shader_core_properties2";
  } else if (has_amd && amd.shaderEngineCount) {
    p.compute_units =
        amd.shaderEngineCount * amd.shaderArraysPerEngineCount * amd.computeUnitsPerShaderArray;
    p.units_source = "VK_AMD_shader_core_properties";
  } else if (has_arm && arm.shaderCoreCount) {
    p.compute_units = arm.shaderCoreCount, p.units_source = "VK_ARM_shader_core_builtins";
  } else if ((p.compute_units = known_compute_units(p.props.vendorID, p.props.deviceID))) {
    p.units_source = "table by device ID";
  }
  vk.vkGetPhysicalDeviceMemoryProperties(pd, &p.mem);
  vk.vkGetPhysicalDeviceFeatures(pd, &p.features);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  p.queues.resize(n);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, p.queues.data());
  p.queue_family = choose_queue_family(p.queues, p.queue_why);
  p.budget_ext = has_ext(p.exts, "VK_EXT_memory_budget");
  for (uint32_t t = 0; t < VK_MAX_MEMORY_TYPES; ++t) p.real_type[t] = t;
  p.subgroup_arith = (p.subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                     (p.subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                     (p.subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
  return p;
}

uint32_t choose_queue_family(const std::vector<VkQueueFamilyProperties>& q, std::string& why) {
  const uint32_t n = uint32_t(q.size());
  auto compute = [&](uint32_t f) {
    return q[f].queueCount > 0 && (q[f].queueFlags & VK_QUEUE_COMPUTE_BIT);
  };
  if (const char* e = std::getenv("SWITCHYARD_VK_QUEUE_FAMILY"); e && *e) {
    char* end = nullptr;
    const unsigned long f = std::strtoul(e, &end, 10);
    if (*e >= '0' && *e <= '9' && *end == 0 && f < n && compute(uint32_t(f))) return uint32_t(f);
    std::string have;
    for (uint32_t f2 = 0; f2 < n; ++f2)
      if (compute(f2)) have += cat(have.empty() ? "" : ", ", f2);
    why = cat("SWITCHYARD_VK_QUEUE_FAMILY: expected the index of a family with compute queues (",
              have.empty() ? "none" : have, "), found '", e, "'");
    return UINT32_MAX;
  }
  // Rank: compute-only before graphics+compute, then with timestamps
  // before without, then the lowest index.
  auto rank = [&](uint32_t f) {
    return (q[f].queueFlags & VK_QUEUE_GRAPHICS_BIT ? 0 : 2) + (q[f].timestampValidBits ? 1 : 0);
  };
  uint32_t best = UINT32_MAX;
  for (uint32_t f = 0; f < n; ++f)
    if (compute(f) && (best == UINT32_MAX || rank(f) > rank(best))) best = f;
  if (best == UINT32_MAX) why = "no compute queue";
  return best;
}

std::string unsupported(const Physical& p, uint32_t storage_buffers) {
  if (p.api < VK_API_VERSION_1_1) return cat("Vulkan ", version_str(p.api), " (1.1 is required)");
  if (p.queue_family == UINT32_MAX) return p.queue_why;
  if (p.props.limits.maxPerStageDescriptorStorageBuffers < storage_buffers)
    return cat("maxPerStageDescriptorStorageBuffers is ",
               p.props.limits.maxPerStageDescriptorStorageBuffers, " (", storage_buffers,
               " are required)");
  if (p.props.limits.maxComputeSharedMemorySize < 16384) return "less than 16 KiB of shared memory";
  return "";
}

namespace {

DeviceType device_type(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceType::integrated_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceType::discrete_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceType::virtual_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceType::cpu;
    default:
      return DeviceType::other;
  }
}

}  // namespace

DeviceInfo make_info(const Physical& p, int index, const MemoryPolicy& mp) {
  DeviceInfo info;
  info.backend = "vulkan";
  info.index = index;
  info.name = p.props.deviceName;
  info.type = device_type(p.props.deviceType);
  auto& L = p.props.limits;
  std::string heaps;
  for (uint32_t h = 0; h < p.mem.memoryHeapCount; ++h) {
    heaps += (h ? ", " : "") + mib(p.mem.memoryHeaps[h].size);
    if (p.mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      heaps += " device-local";
      info.memory_bytes = std::max<uint64_t>(info.memory_bytes, p.mem.memoryHeaps[h].size);
    }
  }
  // What tensors can use: on a device whose tensors spill to another heap
  // past their own (an APU), both.
  if (mp.tensor >= 0) {
    const uint32_t h = p.mem.memoryTypes[mp.tensor].heapIndex;
    info.memory_bytes = p.mem.memoryHeaps[h].size;
    if (mp.tensor_fallback >= 0)
      info.memory_bytes += p.mem.memoryHeaps[p.mem.memoryTypes[mp.tensor_fallback].heapIndex].size;
  }
  info.properties = {
      {"vendor", vendor_name(p.props.vendorID)},
      {"type", device_type_name(info.type)},
      {"driver", p.has_driver_props ? cat(p.driver.driverName, " ", p.driver.driverInfo)
                                    : std::to_string(p.props.driverVersion)},
      {"api", version_str(p.props.apiVersion)},
      {"heaps", heaps},
      {"memory", mp.describe(p)},
      {"subgroup",
       cat(p.subgroup.subgroupSize, p.subgroup_arith ? " (arithmetic)" : " (no arithmetic)")},
      {"max_storage_buffer", mib(L.maxStorageBufferRange)},
      {"shared_memory", cat(L.maxComputeSharedMemorySize / 1024, " KiB")},
      {"max_workgroup", cat(L.maxComputeWorkGroupInvocations)},
      {"compute_units", p.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU
                            ? std::string("- (CPU driver: GEMMs keep its tiles, no split-K)")
                        : p.compute_units ? cat(p.compute_units, " (", p.units_source, ")")
                                          : std::string("unknown (guessed by type)")},
      {"queue_family",
       cat(p.queue_family, (p.queues[p.queue_family].queueFlags & VK_QUEUE_GRAPHICS_BIT)
                               ? " (graphics+compute)"
                               : " (compute-only)")},
  };
  return info;
}

}  // namespace switchyard::vk_impl
