// VulkanDevice: set-up and teardown, settings, and the backend entry point
// (vulkan_backend) that lists the devices. See vk_device.h for the parts.
#include "vk_device.h"

namespace switchyard::vk_impl {

void VulkanDevice::check(VkResult r, const char* op, const char* what) {
  if (r == VK_SUCCESS) return;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw OutOfMemory(cat("[", op, "] ", what, " on ", str(), " failed: ", result_name(r)));
  if (r == VK_ERROR_DEVICE_LOST) lost_ = true;
  throw Error(cat("[", op, "] ", what, " on ", str(), " failed: ", result_name(r)));
}

void VulkanDevice::ensure() {
  if (shut_down_) throw Error(cat("[vulkan] ", str(), " was shut down (the program is exiting)"));
  if (ready_) {
    if (lost_)
      throw Error(cat("[vulkan] ", str(), " was lost (VK_ERROR_DEVICE_LOST) and cannot be used"));
    return;
  }
  try {
    choose_tiles();  // validates the SWITCHYARD_VK_* settings first
    create();
    ready_ = true;
  } catch (...) {
    destroy();
    throw;
  }
}

void VulkanDevice::create() {
  float prio = 1.f;
  VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  q.queueFamilyIndex = p_.queue_family;
  q.queueCount = 1;
  q.pQueuePriorities = &prio;
  VkPhysicalDeviceFeatures f{};
  VkPhysicalDeviceDescriptorIndexingFeatures di{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_INDEXING_FEATURES};
  bool di_api = p_.api >= VK_API_VERSION_1_2 || has_ext(p_.exts, "VK_EXT_descriptor_indexing");
  if (di_api) {
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &di;
    vk.vkGetPhysicalDeviceFeatures2(p_.pd, &f2);
  }
  uab_feature_ = di_api && di.descriptorBindingStorageBufferUpdateAfterBind;
  VkPhysicalDeviceDescriptorIndexingFeatures enable_di{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_INDEXING_FEATURES};
  enable_di.descriptorBindingStorageBufferUpdateAfterBind = VK_TRUE;
  std::vector<const char*> exts;
  if (uab_feature_ && p_.api < VK_API_VERSION_1_2) exts.push_back("VK_EXT_descriptor_indexing");
  if (has_ext(p_.exts, "VK_KHR_portability_subset")) exts.push_back("VK_KHR_portability_subset");
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &q;
  ci.pEnabledFeatures = &f;
  ci.enabledExtensionCount = uint32_t(exts.size());
  ci.ppEnabledExtensionNames = exts.data();
  if (uab_feature_ && !env_on("SWITCHYARD_VK_NO_UPDATE_AFTER_BIND")) ci.pNext = &enable_di;
  check(vk.vkCreateDevice(p_.pd, &ci, nullptr, &dev_), "vulkan", "vkCreateDevice");
  vk.vkGetDeviceQueue(dev_, p_.queue_family, 0, &queue_);

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = p_.queue_family;
  check(vk.vkCreateCommandPool(dev_, &pci, nullptr, &cmd_pool_), "vulkan", "vkCreateCommandPool");

  // One set per launch: its arguments, the launch table, the status word.
  // With update-after-bind (descriptor indexing) a new buffer for an
  // argument is written into the set without re-recording the command
  // buffer; without it the command buffer is recorded again.
  uab_ = has_update_after_bind();
  VkDescriptorSetLayoutBinding b[kBindings] = {};
  VkDescriptorBindingFlags bflags[kBindings];
  for (uint32_t k = 0; k < kBindings; ++k) {
    b[k] = {
        k,
        k == kTableBinding ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    bflags[k] = k < kArgBindings ? VK_DESCRIPTOR_BINDING_UPDATE_AFTER_BIND_BIT : 0;
  }
  VkDescriptorSetLayoutBindingFlagsCreateInfo fci{
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO};
  fci.bindingCount = kBindings;
  fci.pBindingFlags = bflags;
  VkDescriptorSetLayoutCreateInfo lci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  lci.bindingCount = kBindings;
  lci.pBindings = b;
  if (uab_) {
    lci.pNext = &fci;
    lci.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_UPDATE_AFTER_BIND_POOL_BIT;
  }
  check(vk.vkCreateDescriptorSetLayout(dev_, &lci, nullptr, &set_layout_), "vulkan",
        "vkCreateDescriptorSetLayout");
  VkPipelineLayoutCreateInfo plci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &set_layout_;
  check(vk.vkCreatePipelineLayout(dev_, &plci, nullptr, &pipe_layout_), "vulkan",
        "vkCreatePipelineLayout");

  uint32_t bits = p_.queues[p_.queue_family].timestampValidBits;
  ts_ok_ = bits > 0 && p_.props.limits.timestampPeriod > 0;
  ts_period_ = p_.props.limits.timestampPeriod;
  ts_mask_ = bits >= 64 ? ~0ull : (1ull << bits) - 1;
  load_pipeline_cache();
  status_ = make_host_buffer(256, true);
  std::memset(status_.mapped, 0, 256);
  // Table entries sit at uniform-buffer offset alignment.
  uint64_t ua = std::max<uint64_t>(p_.props.limits.minUniformBufferOffsetAlignment, 16);
  op_stride_ = (sizeof(OpParams) + ua - 1) / ua * ua;
  table_ = make_host_buffer(1 << 20, true);
  table_ranges_ = RangeAllocator(table_.size / op_stride_);
}

bool VulkanDevice::has_update_after_bind() {
  if (env_on("SWITCHYARD_VK_NO_UPDATE_AFTER_BIND")) return false;
  if (p_.api < VK_API_VERSION_1_2 && !has_ext(p_.exts, "VK_EXT_descriptor_indexing")) return false;
  return uab_feature_;
}

void VulkanDevice::choose_tiles() {
  auto& L = p_.props.limits;
  uint32_t maxwg = std::min(L.maxComputeWorkGroupInvocations, L.maxComputeWorkGroupSize[0]);
  lc_.device = str();
  lc_.max_range = p_.props.limits.maxStorageBufferRange;
  lc_.storage_align = std::max<uint64_t>(p_.props.limits.minStorageBufferOffsetAlignment, 4);
  lc_.wg = 256;
  while (lc_.wg > maxwg) lc_.wg /= 2;
  // GEMM tiles {BM, BN, BK, TM, TN}: a workgroup computes BM x BN of C, BK
  // deep, with BM/TM * BN/TN invocations of TM x TN accumulators and
  // 4*BK*(BM+BN) bytes of shared memory. CPU-type drivers run invocations as
  // SIMD lanes and load memory one lane at a time (Mesa's llvmpipe), so they
  // get large register blocks: 32x8 in 128x128 tiles (64 invocations), with
  // A's loads shared across a subgroup (gemm_sg below). GPUs get 4x4 in
  // 64x64 tiles (256 invocations). A GEMM that fits in one such tile uses
  // the second, smaller set, so it still spreads over the device.
  bool cpu_like = p_.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  auto& gemm_ = lc_.gemm;
  auto& gemm_small_ = lc_.gemm_small;
  gemm_ = cpu_like ? std::array<uint32_t, 5>{128, 128, 16, 32, 8}
                   : std::array<uint32_t, 5>{64, 64, 16, 4, 4};
  gemm_small_ = cpu_like ? std::array<uint32_t, 5>{64, 64, 16, 16, 8}
                         : std::array<uint32_t, 5>{32, 32, 16, 4, 4};
  for (auto* t : {&gemm_, &gemm_small_})
    while (((*t)[0] / (*t)[3]) * ((*t)[1] / (*t)[4]) > maxwg) (*t)[3] *= 2, (*t)[4] *= 2;
  if (const char* e = std::getenv("SWITCHYARD_VK_GEMM_TILE")) {
    uint32_t t[5];
    SY_CHECK(std::sscanf(e, "%u,%u,%u,%u,%u", &t[0], &t[1], &t[2], &t[3], &t[4]) == 5, "vulkan",
             "expected SWITCHYARD_VK_GEMM_TILE=BM,BN,BK,TM,TN, found '", e, "'");
    uint32_t w = t[3] && t[4] ? (t[0] / t[3]) * (t[1] / t[4]) : 0;
    SY_CHECK(w > 0 && w <= maxwg && t[3] % 4 == 0 && t[4] % 4 == 0 && t[0] % t[3] == 0 &&
                 t[1] % t[4] == 0 && t[2] % 4 == 0 &&
                 4 * t[2] * (t[0] + t[1]) <= L.maxComputeSharedMemorySize,
             "vulkan", "SWITCHYARD_VK_GEMM_TILE=", e, " does not fit ", str(),
             ": expected TM, TN, BK multiples of 4 dividing BM, BN, with BM/TM*BN/TN <= ", maxwg,
             " invocations and the tiles in shared memory");
    gemm_ = gemm_small_ = {t[0], t[1], t[2], t[3], t[4]};
  }
  // Grid-stride kernels: enough workgroups to fill a GPU's compute units;
  // on CPU drivers loops inside an invocation cost more than extra
  // workgroups (measured: 4096 beats 64 and 65535 for a 16M add).
  // SWITCHYARD_VK_GRID_CAP overrides (benchmarking).
  lc_.grid_cap = cpu_like ? 4096 : 16384;
  if (const char* gc = std::getenv("SWITCHYARD_VK_GRID_CAP"); gc && std::atoi(gc) > 0)
    lc_.grid_cap = uint32_t(std::min<int>(std::atoi(gc), int(kMaxGroups)));
  // The gemm_sg build shares A's loads across a subgroup's lanes; it needs
  // every subgroup to be consecutive invocations of one tile row, which
  // CPU drivers guarantee (lanes are SIMD lanes over the invocation index).
  uint32_t sgs = p_.subgroup.subgroupSize;
  auto sg_fits = [&](const std::array<uint32_t, 5>& t) {
    return sgs > 0 && sgs >= t[3] / 4 && (t[1] / t[4]) % sgs == 0;
  };
  gemm_sg_ = cpu_like && !env_on("SWITCHYARD_VK_NO_SUBGROUPS") &&
             (p_.subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
             (p_.subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) &&
             sg_fits(gemm_) && sg_fits(gemm_small_);
  use_subgroups_ = p_.subgroup_arith && !env_on("SWITCHYARD_VK_NO_SUBGROUPS");
}

void VulkanDevice::destroy() {
  ready_ = false;
  if (!dev_) return;
  if (queue_) {
    try {
      flush();  // work still waiting in the batch completes before teardown
    } catch (...) {
    }
    vk.vkDeviceWaitIdle(dev_);
  }
  host_copies_.clear();  // downloads nobody waited for: their targets may be gone
  if (!lost_ && status_.mapped) {
    try {
      retire(true);
    } catch (...) {
    }
  }
  save_pipeline_cache();
  for (auto& [id, rec] : recordings_) free_recording(rec);
  recordings_.clear();
  for (auto& [key, p] : pipelines_)
    if (p) vk.vkDestroyPipeline(dev_, p, nullptr);
  if (pipe_cache_) vk.vkDestroyPipelineCache(dev_, pipe_cache_, nullptr);
  for (auto& f : inflight_) vk.vkDestroyFence(dev_, f.fence, nullptr);
  for (VkFence f : free_fences_) vk.vkDestroyFence(dev_, f, nullptr);
  for (Alloc* a : deferred_) delete a;
  for (auto& b : blocks_) {
    if (b.buf) vk.vkDestroyBuffer(dev_, b.buf, nullptr);
    if (b.mem) vk.vkFreeMemory(dev_, b.mem, nullptr);
  }
  blocks_.clear();
  free_host_buffer(ring_);
  free_host_buffer(table_);
  free_host_buffer(status_);
  for (VkDescriptorPool dp : desc_pools_) vk.vkDestroyDescriptorPool(dev_, dp, nullptr);
  if (pipe_layout_) vk.vkDestroyPipelineLayout(dev_, pipe_layout_, nullptr);
  if (set_layout_) vk.vkDestroyDescriptorSetLayout(dev_, set_layout_, nullptr);
  if (cmd_pool_) vk.vkDestroyCommandPool(dev_, cmd_pool_, nullptr);
  if (qpool_) vk.vkDestroyQueryPool(dev_, qpool_, nullptr);
  vk.vkDestroyDevice(dev_, nullptr);
  // Back to the state before ensure(), so a failed set-up can be retried.
  dev_ = VK_NULL_HANDLE;
  queue_ = VK_NULL_HANDLE;
  cmd_pool_ = VK_NULL_HANDLE;
  set_layout_ = VK_NULL_HANDLE;
  pipe_layout_ = VK_NULL_HANDLE;
  pipe_cache_ = VK_NULL_HANDLE;
  qpool_ = VK_NULL_HANDLE;
  query_segs_.clear();
  batch_prof_.clear();
  query_head_ = 0;
  ts_anchored_ = false;
  ts_offset_ = 0;
  pipelines_.clear();
  pipeline_index_.clear();
  desc_pools_.clear();
  inflight_.clear();
  free_fences_.clear();
  free_cbs_.clear();
  batch_.clear();
  batch_transfer_.clear();
  batch_has_program_ = false;
  open_cb_ = VK_NULL_HANDLE;
  deferred_.clear();
  ring_segs_.clear();
  ring_head_ = 0;
  std::fill(std::begin(heap_used_), std::end(heap_used_), 0);
}

void VulkanDevice::bump(uint64_t& c, uint64_t n) {
  std::atomic_ref<uint64_t>(c).fetch_add(n, std::memory_order_relaxed);
}

void VulkanDevice::synchronize_impl() {
  std::lock_guard lock(mu_);
  if (!dev_) return;
  wait_idle();
  throw_pending();
}

namespace {

// Devices and the instance, torn down by an atexit handler registered after
// the loader, driver and layers were loaded: handlers and static destructors
// run in reverse order, so this runs while those libraries are intact (the
// registry that holds the devices is destroyed later, after them).
struct Live {
  std::vector<std::weak_ptr<VulkanDevice>> devices;
  std::weak_ptr<Instance> instance;
};
Live* live = nullptr;  // leaked on purpose: used at exit

void shutdown_at_exit() {
  if (!live) return;
  for (auto& w : live->devices)
    if (auto d = w.lock()) d->shutdown();
  if (auto in = live->instance.lock()) in->shutdown();
}

}  // namespace
}  // namespace switchyard::vk_impl

namespace switchyard::detail {

BackendEntry vulkan_backend() {
  using namespace vk_impl;
  BackendEntry e{"vulkan", false, "", {}};
  std::string why;
  auto in = create_instance(why);
  if (!in) {
    e.reason = why;
    return e;
  }
  uint32_t n = 0;
  VkResult r = vk.vkEnumeratePhysicalDevices(in->inst, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  if (r == VK_SUCCESS && n) r = vk.vkEnumeratePhysicalDevices(in->inst, &n, pds.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    e.reason = cat("vkEnumeratePhysicalDevices failed: ", result_name(r));
    return e;
  }
  std::string skipped;
  bool force_staging = env_on("SWITCHYARD_VK_FORCE_STAGING");
  for (VkPhysicalDevice pd : pds) {
    Physical p = query(pd, in->api);
    if (std::string u = unsupported(p, kBindings); !u.empty()) {
      skipped += cat(skipped.empty() ? "" : "; ", p.props.deviceName, ": ", u);
      continue;
    }
    bool zero_copy = !force_staging && has_zero_copy(p.mem);
    e.devices.push_back(
        std::make_shared<VulkanDevice>(in, std::move(p), int(e.devices.size()), zero_copy));
  }
  live = new Live;
  live->instance = in;
  for (auto& d : e.devices) live->devices.push_back(std::static_pointer_cast<VulkanDevice>(d));
  std::atexit(shutdown_at_exit);
  e.available = !e.devices.empty();
  if (!e.available)
    e.reason = pds.empty()
                   ? "no Vulkan device found (is a driver installed? mesa-vulkan-drivers provides "
                     "lavapipe; VK_ICD_FILENAMES may point elsewhere)"
                   : "no Vulkan device can run Switchyard: " + skipped;
  return e;
}

}  // namespace switchyard::detail
