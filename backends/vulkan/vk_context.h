// SPDX-License-Identifier: MIT
// The Vulkan backend's context: what every part of a VulkanDevice shares.
// The physical device's facts, the logical device and its queue, the command
// pool, the descriptor-set and pipeline layouts, the feature decisions made
// at set-up (update-after-bind, subgroups, GEMM tiles), and the device's
// error state (lost, or a bad-input report waiting to be thrown).
//
// The parts (see vk_device.h) each own their Vulkan objects and hold a
// reference to the context; the context is created first and destroyed last.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "backend_api.h"
#include "switchyard/error.h"
#include "vk_instance.h"
#include "vk_launch.h"
#include "vk_loader.h"
#include "vk_memory_policy.h"

namespace switchyard::vk_impl {

using detail::cat;

// Descriptor bindings 0-4 are the launch's arguments (kArgBindings), 5 its
// table entry (a uniform block), 6 the status word.
constexpr uint32_t kTableBinding = 5, kStatusBinding = 6, kBindings = 7;

// A device's counters are read without its lock (Device::counters()).
inline void bump(uint64_t& c, uint64_t n = 1) {
  std::atomic_ref<uint64_t>(c).fetch_add(n, std::memory_order_relaxed);
}

// A host-visible helper buffer (staging ring, launch table, status word).
// Non-coherent memory is flushed and invalidated through the allocator;
// `real` is the driver's mapping when `mapped` is an emulation's shadow
// (vk_memory_policy.h).
struct HostBuf {
  VkDeviceMemory mem = VK_NULL_HANDLE;
  VkBuffer buf = VK_NULL_HANDLE;
  uint64_t size = 0;
  char* mapped = nullptr;
  char* real = nullptr;
  uint64_t bytes = 0;  // of device memory
  bool coherent = true, cached = true;
};

struct Context {
  Context(const BackendDevice& owner, Counters& counters, std::shared_ptr<Instance> in, Physical p,
          const MemoryPolicy& mem)
      : owner(owner), counters(counters), in(std::move(in)), p(std::move(p)), mem(mem) {}

  const BackendDevice& owner;  // for messages (owner.str()) and profiler events
  Counters& counters;
  std::shared_ptr<Instance> in;
  const Physical p;
  // Which memory types hold what (vk_memory_policy.h); mem.zero_copy:
  // tensors live in mapped memory and transfers are memcpy.
  const MemoryPolicy mem;

  VkDevice dev = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool cmd_pool = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout pipe_layout = VK_NULL_HANDLE;
  bool uab = false;            // descriptor sets are updated after bind (no re-recording)
  LaunchConfig lc;             // workgroup and tile sizes, limits
  bool gemm_sg = false;        // the gemm_sg build (A's loads shared across a subgroup)
  bool use_subgroups = false;  // the _sg builds of kernels the table marks kSubgroup
  bool lost = false;           // VK_ERROR_DEVICE_LOST was seen, or a wait ran out
  bool hung = false;           // lost because a wait ran out: its work may never finish
  uint64_t wait_limit_ms = 0;  // a fence wait longer than this is a lost device
  // Descriptor sets all pools together may hold (0: as many as the driver
  // gives; SWITCHYARD_VK_MAX_DESCRIPTOR_SETS, tests of running out).
  uint64_t max_descriptor_sets = 0;
  std::string pending_error;  // bad input a kernel reported, thrown at the next wait
  // VK_EXT_device_fault, where the device has it: what the driver says about
  // a loss, added to the DeviceLost message. `lost_what`: the first loss's
  // message, repeated by every later refusal.
#ifdef VK_EXT_device_fault
  PFN_vkGetDeviceFaultInfoEXT fault_info = nullptr;
#endif
  std::string lost_what;
  // Custom kernels' SPIR-V by registry id (VulkanDevice::prepare_custom),
  // read by Pipelines::create; guarded by custom_mu (launches on other
  // threads add kernels while a Program's pipelines are made).
  mutable std::mutex custom_mu;
  std::unordered_map<int64_t, std::shared_ptr<const std::vector<uint32_t>>> custom_spirv;
  // Called at the first VK_ERROR_DEVICE_LOST (under the device's lock): a
  // bounded wait for what was submitted (VulkanDevice sets it).
  std::function<void()> on_lost;

  std::string name() const { return owner.str(); }
  // VK_EXT_debug_utils, when the instance has it (else nothing): the
  // object's name, "switchyard <device> <what>", as validation messages and
  // GPU debuggers show it; a label around commands (a launch's kernel).
  void set_name(VkObjectType type, uint64_t handle, const std::string& what) const;
  template <class H>
  void set_name(VkObjectType type, H handle, const std::string& what) const {
    if constexpr (std::is_pointer_v<H>)
      set_name(type, uint64_t(reinterpret_cast<uintptr_t>(handle)), what);
    else
      set_name(type, uint64_t(handle), what);
  }
  bool labels() const {
    return in->debug_utils && vk.vkCmdBeginDebugUtilsLabelEXT && vk.vkCmdEndDebugUtilsLabelEXT;
  }
  void begin_label(VkCommandBuffer cb, const std::string& text) const;
  void end_label(VkCommandBuffer cb) const;
  // The driver's account of a device loss (VK_EXT_device_fault), or "".
  std::string fault_detail() const;
  // Throws for a failed call: OutOfMemory for the out-of-memory results,
  // DeviceLost for VK_ERROR_DEVICE_LOST (and the device stays lost), else
  // Error.
  void check(VkResult r, const char* op, const char* what);
  void throw_pending();
  // Validates the SWITCHYARD_VK_* settings, then creates the logical device,
  // queue, command pool and layouts. destroy() undoes what was created.
  void create();
  void destroy();

 private:
  void choose_tiles();
  bool has_update_after_bind(bool feature) const;
};

}  // namespace switchyard::vk_impl
