// SPDX-License-Identifier: MIT
// The Vulkan context: the logical device, its queue, pools and layouts, and
// the feature decisions made when it is created (see vk_context.h).
#include "vk_context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "vk_gemm.h"

namespace switchyard::vk_impl {

void Context::check(VkResult r, const char* op, const char* what) {
  if (r == VK_SUCCESS) return;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw OutOfMemory(cat("[", op, "] ", what, " on ", name(), " failed: ", result_name(r)));
  if (r == VK_ERROR_DEVICE_LOST) {
    const bool first = !lost;
    lost = true;
    std::string m = cat("[", op, "] ", what, " on ", name(), " failed: ", result_name(r),
                        ": the device is lost; every later use of it throws (other devices and "
                        "the CPU still work)");
    if (first) {
      // The driver's account, unless the loss was injected (SWITCHYARD_VK_FAULT):
      // the device is not lost then, and asking is invalid
      // (VUID-vkGetDeviceFaultInfoEXT-device-07336).
      const FaultStats f = fault_stats();
      if (!(f.fired && f.result == VK_ERROR_DEVICE_LOST)) m += fault_detail();
      lost_what = m;
      // What was queued ends now: a lost device's waits return in finite
      // time (the specification's rule), so nothing touches the device's
      // memory after the error reaches the caller, and teardown at exit
      // finds the queue idle (on lavapipe, under injected faults, the queue
      // thread otherwise still compiles at exit, racing LLVM's destructors).
      // Bounded: a driver that does not keep that rule is taken for hung.
      if (on_lost) on_lost();
    }
    throw DeviceLost(m);
  }
  throw Error(cat("[", op, "] ", what, " on ", name(), " failed: ", result_name(r)));
}

void Context::set_name(VkObjectType type, uint64_t handle, const std::string& what) const {
  if (!in->debug_utils || !vk.vkSetDebugUtilsObjectNameEXT || !handle || !dev) return;
  const std::string n = cat("switchyard ", name(), " ", what);
  VkDebugUtilsObjectNameInfoEXT ni{VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT};
  ni.objectType = type;
  ni.objectHandle = handle;
  ni.pObjectName = n.c_str();
  vk.vkSetDebugUtilsObjectNameEXT(dev, &ni);  // a name that did not stick costs nothing
}

void Context::begin_label(VkCommandBuffer cb, const std::string& text) const {
  VkDebugUtilsLabelEXT l{VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT};
  l.pLabelName = text.c_str();
  vk.vkCmdBeginDebugUtilsLabelEXT(cb, &l);
}

void Context::end_label(VkCommandBuffer cb) const { vk.vkCmdEndDebugUtilsLabelEXT(cb); }

std::string Context::fault_detail() const {
#ifdef VK_EXT_device_fault
  if (!fault_info || !dev) return "";
  VkDeviceFaultCountsEXT counts{VK_STRUCTURE_TYPE_DEVICE_FAULT_COUNTS_EXT};
  VkResult r = fault_info(dev, &counts, nullptr);
  if (r != VK_SUCCESS) return cat("; VK_EXT_device_fault gave no detail (", result_name(r), ")");
  std::vector<VkDeviceFaultAddressInfoEXT> addrs(std::min<uint32_t>(counts.addressInfoCount, 16));
  std::vector<VkDeviceFaultVendorInfoEXT> vendor(std::min<uint32_t>(counts.vendorInfoCount, 16));
  const uint64_t dump = counts.vendorBinarySize;
  counts.addressInfoCount = uint32_t(addrs.size());
  counts.vendorInfoCount = uint32_t(vendor.size());
  counts.vendorBinarySize = 0;  // the vendor's binary dump is not fetched
  VkDeviceFaultInfoEXT info{VK_STRUCTURE_TYPE_DEVICE_FAULT_INFO_EXT};
  info.pAddressInfos = addrs.data();
  info.pVendorInfos = vendor.data();
  r = fault_info(dev, &counts, &info);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE)
    return cat("; VK_EXT_device_fault gave no detail (", result_name(r), ")");
  auto hex = [](uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return std::string(b);
  };
  static const char* const kinds[] = {"none",
                                      "invalid read",
                                      "invalid write",
                                      "invalid execute",
                                      "instruction pointer (unknown)",
                                      "instruction pointer (invalid)",
                                      "instruction pointer (fault)"};
  std::string d =
      cat("; the driver says (VK_EXT_device_fault): ",
          info.description[0]
              ? std::string(info.description, strnlen(info.description, VK_MAX_DESCRIPTION_SIZE))
              : "(no description)");
  for (uint32_t i = 0; i < std::min<uint32_t>(counts.addressInfoCount, uint32_t(addrs.size()));
       ++i) {
    const auto& a = addrs[i];
    const uint32_t k = uint32_t(a.addressType);
    d += cat(i ? ", " : "; addresses: ", k < 7 ? kinds[k] : "unknown kind", " at ",
             hex(a.reportedAddress));
    if (a.addressPrecision > 1) d += cat(" (within ", a.addressPrecision, " bytes)");
  }
  for (uint32_t i = 0; i < std::min<uint32_t>(counts.vendorInfoCount, uint32_t(vendor.size()));
       ++i) {
    const auto& v = vendor[i];
    d += cat(i ? ", " : "; vendor: ",
             std::string(v.description, strnlen(v.description, VK_MAX_DESCRIPTION_SIZE)), " (code ",
             hex(v.vendorFaultCode), ", data ", hex(v.vendorFaultData), ")");
  }
  if (dump) d += cat("; a vendor crash dump of ", dump, " bytes was not saved");
  return d;
#else
  return "";
#endif
}

void Context::throw_pending() {
  if (pending_error.empty()) return;
  std::string e = std::move(pending_error);
  pending_error.clear();
  throw Error(e);
}

void Context::create() {
  choose_tiles();  // validates the SWITCHYARD_VK_* settings first
  float prio = 1.f;
  VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  q.queueFamilyIndex = p.queue_family;
  q.queueCount = 1;
  q.pQueuePriorities = &prio;
  // Custom kernels may compute in double, 64- and 16-bit integers where the
  // device has them (vk_custom_check.cpp refuses them elsewhere).
  VkPhysicalDeviceFeatures f{};
  f.shaderFloat64 = p.features.shaderFloat64;
  f.shaderInt64 = p.features.shaderInt64;
  f.shaderInt16 = p.features.shaderInt16;
  VkPhysicalDeviceDescriptorIndexingFeatures di{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_INDEXING_FEATURES};
  bool di_api = p.api >= VK_API_VERSION_1_2 || has_ext(p.exts, "VK_EXT_descriptor_indexing");
  if (di_api) {
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &di;
    vk.vkGetPhysicalDeviceFeatures2(p.pd, &f2);
  }
  bool uab_feature = di_api && di.descriptorBindingStorageBufferUpdateAfterBind;
  VkPhysicalDeviceDescriptorIndexingFeatures enable_di{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_INDEXING_FEATURES};
  enable_di.descriptorBindingStorageBufferUpdateAfterBind = VK_TRUE;
  std::vector<const char*> exts;
  if (uab_feature && p.api < VK_API_VERSION_1_2) exts.push_back("VK_EXT_descriptor_indexing");
  if (has_ext(p.exts, "VK_KHR_portability_subset")) exts.push_back("VK_KHR_portability_subset");
#ifdef VK_EXT_device_fault
  // VK_EXT_device_fault: the driver's account of a loss (the faulting
  // address, the vendor's code), for the DeviceLost message.
  VkPhysicalDeviceFaultFeaturesEXT fault{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_FEATURES_EXT};
  if (has_ext(p.exts, VK_EXT_DEVICE_FAULT_EXTENSION_NAME)) {
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &fault;
    vk.vkGetPhysicalDeviceFeatures2(p.pd, &f2);
    fault.pNext = nullptr;
    fault.deviceFaultVendorBinary = VK_FALSE;
  }
  if (fault.deviceFault) exts.push_back(VK_EXT_DEVICE_FAULT_EXTENSION_NAME);
#endif
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &q;
  ci.pEnabledFeatures = &f;
  ci.enabledExtensionCount = uint32_t(exts.size());
  ci.ppEnabledExtensionNames = exts.data();
  if (uab_feature && !env_on("SWITCHYARD_VK_NO_UPDATE_AFTER_BIND")) ci.pNext = &enable_di;
#ifdef VK_EXT_device_fault
  if (fault.deviceFault) {
    fault.pNext = const_cast<void*>(ci.pNext);
    ci.pNext = &fault;
  }
#endif
  check(vk.vkCreateDevice(p.pd, &ci, nullptr, &dev), "vulkan", "vkCreateDevice");
#ifdef VK_EXT_device_fault
  if (fault.deviceFault)
    fault_info = reinterpret_cast<PFN_vkGetDeviceFaultInfoEXT>(
        vk.vkGetDeviceProcAddr(dev, "vkGetDeviceFaultInfoEXT"));
#endif
  vk.vkGetDeviceQueue(dev, p.queue_family, 0, &queue);
  set_name(VK_OBJECT_TYPE_DEVICE, dev, "device");
  set_name(VK_OBJECT_TYPE_QUEUE, queue, cat("queue (family ", p.queue_family, ")"));

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = p.queue_family;
  check(vk.vkCreateCommandPool(dev, &pci, nullptr, &cmd_pool), "vulkan", "vkCreateCommandPool");
  set_name(VK_OBJECT_TYPE_COMMAND_POOL, cmd_pool, "command pool");

  // One set per launch: its arguments, the launch table, the status word.
  // With update-after-bind (descriptor indexing) a new buffer for an
  // argument is written into the set without re-recording the command
  // buffer; without it the command buffer is recorded again.
  uab = has_update_after_bind(uab_feature);
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
  if (uab) {
    lci.pNext = &fci;
    lci.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_UPDATE_AFTER_BIND_POOL_BIT;
  }
  check(vk.vkCreateDescriptorSetLayout(dev, &lci, nullptr, &set_layout), "vulkan",
        "vkCreateDescriptorSetLayout");
  VkPipelineLayoutCreateInfo plci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &set_layout;
  check(vk.vkCreatePipelineLayout(dev, &plci, nullptr, &pipe_layout), "vulkan",
        "vkCreatePipelineLayout");
  set_name(VK_OBJECT_TYPE_DESCRIPTOR_SET_LAYOUT, set_layout, "launch set layout");
  set_name(VK_OBJECT_TYPE_PIPELINE_LAYOUT, pipe_layout, "launch pipeline layout");
}

bool Context::has_update_after_bind(bool feature) const {
  if (env_on("SWITCHYARD_VK_NO_UPDATE_AFTER_BIND")) return false;
  if (p.api < VK_API_VERSION_1_2 && !has_ext(p.exts, "VK_EXT_descriptor_indexing")) return false;
  return feature;
}

void Context::choose_tiles() {
  auto& L = p.props.limits;
  uint32_t maxwg = std::min(L.maxComputeWorkGroupInvocations, L.maxComputeWorkGroupSize[0]);
  lc.device = name();
  lc.max_range = p.props.limits.maxStorageBufferRange;
  // A smaller limit, as a mobile GPU's (tests run the range splits on small
  // tensors with it): SWITCHYARD_VK_MAX_RANGE=N bytes.
  if (const char* mr = std::getenv("SWITCHYARD_VK_MAX_RANGE")) {
    char* end = nullptr;
    const uint64_t v = std::strtoull(mr, &end, 10);
    SY_CHECK(*mr >= '1' && *mr <= '9' && *end == 0 && v >= 1024, "vulkan",
             "expected SWITCHYARD_VK_MAX_RANGE=N (bytes, at least 1024), found '", mr, "'");
    lc.max_range = std::min<uint64_t>(lc.max_range, v);
  }
  lc.storage_align = std::max<uint64_t>(p.props.limits.minStorageBufferOffsetAlignment, 4);
  lc.wg = 256;
  while (lc.wg > maxwg) lc.wg /= 2;
  // GEMM tiles {BM, BN, BK, TM, TN}: a workgroup computes BM x BN of C, BK
  // deep, with BM/TM * BN/TN invocations of TM x TN accumulators and
  // 4*BK*(BM+BN) bytes of shared memory. CPU-type drivers run invocations as
  // SIMD lanes and load memory one lane at a time (Mesa's llvmpipe), so they
  // get large register blocks: 32x8 in 128x128 tiles (64 invocations), with
  // A's loads shared across a subgroup (gemm_sg below). GPUs get 4x4 in
  // 64x64 tiles (256 invocations). A GEMM that fits in one such tile uses
  // the second, smaller set, so it still spreads over the device.
  bool cpu_like = p.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  auto& gemm = lc.gemm;
  auto& gemm_small = lc.gemm_small;
  gemm = cpu_like ? std::array<uint32_t, 5>{128, 128, 16, 32, 8}
                  : std::array<uint32_t, 5>{64, 64, 16, 4, 4};
  gemm_small = cpu_like ? std::array<uint32_t, 5>{64, 64, 16, 16, 8}
                        : std::array<uint32_t, 5>{32, 32, 16, 4, 4};
  // The convolutions' transposed tiles (pixels by channels): CPU drivers
  // keep the 32-row register blocks with 4 channels a lane, 256 x 32.
  auto& tall = lc.gemm_tall;
  tall = cpu_like ? std::array<uint32_t, 5>{256, 32, 16, 32, 4}
                  : std::array<uint32_t, 5>{128, 32, 16, 8, 4};
  // The narrow tiles (few channels by few taps, deep): CPU drivers take
  // 8 x 4 blocks, 32 invocations (a 32 x 9 product wastes 3.6x of a tile
  // where the small set wastes 14x: its weight gradient 3x faster on
  // lavapipe); GPUs the small set's.
  auto& narrow = lc.gemm_narrow;
  narrow = cpu_like ? std::array<uint32_t, 5>{32, 32, 16, 8, 4} : gemm_small;
  // SWITCHYARD_VK_GEMM_VARIANT (below) runs the GPU sets on any device.
  const char* variant = std::getenv("SWITCHYARD_VK_GEMM_VARIANT");
  if (variant && *variant) {
    gemm = {64, 64, 16, 4, 4};
    gemm_small = {32, 32, 16, 4, 4};
  }
  for (auto* t : {&gemm, &gemm_small, &tall, &narrow})
    while (((*t)[0] / (*t)[3]) * ((*t)[1] / (*t)[4]) > maxwg) (*t)[3] *= 2, (*t)[4] *= 2;
  // GEMM variants (vk_gemm.h): the large set, the prefetching loop and the
  // facts split-K is chosen from.
  GpuFacts facts;
  facts.cpu_like = cpu_like;
  facts.integrated = p.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  facts.vendor = p.props.vendorID;
  facts.device_id = p.props.deviceID;
  facts.compute_units = p.compute_units;
  facts.max_invocations = maxwg;
  facts.shared_bytes = L.maxComputeSharedMemorySize;
  // SWITCHYARD_VK_GEMM_VARIANT=large|medium|small forces a GPU tile set and
  // the prefetching loop on any device (tests run each on lavapipe); =gpu
  // makes the choice a 132-unit NVIDIA GPU would.
  if (variant && *variant) {
    const std::string v = variant;
    SY_CHECK(v == "large" || v == "medium" || v == "small" || v == "gpu", "vulkan",
             "expected SWITCHYARD_VK_GEMM_VARIANT=large, medium, small or gpu, found '", v, "'");
    facts.cpu_like = facts.integrated = false;
    facts.vendor = 0x10DE;
    facts.compute_units = 132;
    configure_gemm(lc, facts);
    SY_CHECK(lc.large_tiles || v != "large", "vulkan",
             "SWITCHYARD_VK_GEMM_VARIANT=large does not fit ", name(),
             ": expected 256 invocations and 16 KiB of shared memory");
    if (v != "gpu")
      lc.gemm_forced_set = v == "large" ? kLargeSet : v == "small" ? kSmallSet : kMediumSet;
  } else {
    configure_gemm(lc, facts);
  }
  // SWITCHYARD_VK_GEMM_SPLIT_K=N: every GEMM that can in N parts of K.
  if (const char* e = std::getenv("SWITCHYARD_VK_GEMM_SPLIT_K"); e && *e) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(e, &end, 10);
    SY_CHECK(*e >= '1' && *e <= '9' && *end == 0 && v >= 1 && v <= 64, "vulkan",
             "expected SWITCHYARD_VK_GEMM_SPLIT_K=N (parts of K, 1 to 64), found '", e, "'");
    lc.gemm_forced_splits = uint32_t(v);
  }
  if (const char* e = std::getenv("SWITCHYARD_VK_GEMM_TILE")) {
    uint32_t t[5];
    SY_CHECK(std::sscanf(e, "%u,%u,%u,%u,%u", &t[0], &t[1], &t[2], &t[3], &t[4]) == 5, "vulkan",
             "expected SWITCHYARD_VK_GEMM_TILE=BM,BN,BK,TM,TN, found '", e, "'");
    uint32_t w = t[3] && t[4] ? (t[0] / t[3]) * (t[1] / t[4]) : 0;
    // (The convolutions' tile loads give each invocation fixed rows and
    // columns: the workgroup a multiple of BM/4 and of BN/4.)
    SY_CHECK(w > 0 && w <= maxwg && t[3] % 4 == 0 && t[4] % 4 == 0 && t[0] % t[3] == 0 &&
                 t[1] % t[4] == 0 && t[2] % 4 == 0 && w % (t[0] / 4) == 0 && w % (t[1] / 4) == 0 &&
                 4 * t[2] * (t[0] + t[1]) <= L.maxComputeSharedMemorySize,
             "vulkan", "SWITCHYARD_VK_GEMM_TILE=", e, " does not fit ", name(),
             ": expected TM, TN, BK multiples of 4 dividing BM, BN, with BM/TM*BN/TN <= ", maxwg,
             " invocations (a multiple of BM/4 and BN/4) and the tiles in shared memory");
    gemm = gemm_small = tall = narrow = lc.gemm_large = {t[0], t[1], t[2], t[3], t[4]};
  }
  // Grid-stride kernels: enough workgroups to fill a GPU's compute units;
  // on CPU drivers loops inside an invocation cost more than extra
  // workgroups (measured: 4096 beats 64 and 65535 for a 16M add).
  // SWITCHYARD_VK_GRID_CAP overrides (benchmarking).
  lc.grid_cap = cpu_like ? 4096 : 16384;
  // A CPU driver runs workgroups on its threads, a few dozen at most; a GPU
  // holds several per compute unit, on up to a few hundred units.
  lc.fill_groups = cpu_like ? 32 : 1024;
  // Row kernels and transposes, by what each device type does well
  // (docs/vulkan.md, "Reductions"): a GPU gives rows longer than 64 a
  // workgroup each and transposes through shared-memory tiles; a CPU
  // driver's barriers and shared memory cost more than they save (on
  // lavapipe a workgroup per 4096-float row ran argmax at 0.9 GB/s against
  // 4.5 for an invocation per row; the tiled transpose at 0.6 GB/s against
  // 1.2), so it keeps rows of up to 4096 in one invocation and transposes
  // element by element.
  lc.short_row = cpu_like ? 4096 : 64;
  lc.tiled_transpose = !cpu_like;
  if (const char* gc = std::getenv("SWITCHYARD_VK_GRID_CAP"); gc && std::atoi(gc) > 0)
    lc.grid_cap = uint32_t(std::min<int>(std::atoi(gc), int(kMaxGroups)));
  // The gemm_sg build shares A's loads across a subgroup's lanes; it needs
  // every subgroup to be consecutive invocations of one tile row, which
  // CPU drivers guarantee (lanes are SIMD lanes over the invocation index).
  uint32_t sgs = p.subgroup.subgroupSize;
  auto sg_fits = [&](const std::array<uint32_t, 5>& t) {
    return sgs > 0 && sgs >= t[3] / 4 && (t[1] / t[4]) % sgs == 0;
  };
  gemm_sg = cpu_like && !env_on("SWITCHYARD_VK_NO_SUBGROUPS") &&
            (p.subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
            (p.subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) && sg_fits(gemm) &&
            sg_fits(gemm_small) && (!lc.large_tiles || sg_fits(lc.gemm_large));
  lc.shared_a_loads = gemm_sg;
  // A conv tile set fits where the conv kernels' build takes it (the
  // subgroup one shares A's loads along a tile row) and shared memory does.
  auto conv_fits = [&](const std::array<uint32_t, 5>& t) {
    const uint32_t wg = (t[0] / t[3]) * (t[1] / t[4]);
    return (!gemm_sg || sg_fits(t)) && t[4] % 4 == 0 && t[3] % 4 == 0 &&
           4 * t[2] * (t[0] + t[1]) <= L.maxComputeSharedMemorySize && wg % (t[0] / 4) == 0 &&
           wg % (t[1] / 4) == 0;
  };
  lc.conv_tall = conv_fits(tall);
  lc.conv_narrow = narrow != gemm_small && conv_fits(narrow);
  if (env_on("SWITCHYARD_VK_EXACT_DIV")) lc.reciprocal_limit = 0;
  use_subgroups = p.subgroup_arith && !env_on("SWITCHYARD_VK_NO_SUBGROUPS");
  // Mesa's llvmpipe (lavapipe) ends all of an invocation's loops after
  // 65535 iterations in all (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), with no
  // error: a GEMM with K above about 15,000 came out wrong. Launches are
  // planned within the budget (plan_launches). SWITCHYARD_VK_LOOP_BUDGET
  // sets another (tests use a small one to run the split paths on small
  // sizes; 0: none). A property of the driver, so it holds under
  // SWITCHYARD_VK_SIMULATE too (which changes the device's type, not its name).
  // A submission that has not completed after this long is taken for a hung
  // device (drivers usually report VK_ERROR_DEVICE_LOST themselves within
  // seconds; this bounds the wait where one does not): 5 minutes, or
  // SWITCHYARD_VK_WAIT_LIMIT_MS.
  wait_limit_ms = 300000;
  if (const char* w = std::getenv("SWITCHYARD_VK_WAIT_LIMIT_MS")) {
    char* end = nullptr;
    wait_limit_ms = uint64_t(std::strtoull(w, &end, 10));
    SY_CHECK(*w >= '1' && *w <= '9' && *end == 0, "vulkan",
             "expected SWITCHYARD_VK_WAIT_LIMIT_MS=N (milliseconds, at least 1), found '", w, "'");
  }
  if (const char* ds = std::getenv("SWITCHYARD_VK_MAX_DESCRIPTOR_SETS")) {
    char* end = nullptr;
    max_descriptor_sets = uint64_t(std::strtoull(ds, &end, 10));
    SY_CHECK(*ds >= '1' && *ds <= '9' && *end == 0, "vulkan",
             "expected SWITCHYARD_VK_MAX_DESCRIPTOR_SETS=N (sets, at least 1), found '", ds, "'");
  }
  lc.loop_budget = std::strncmp(p.props.deviceName, "llvmpipe", 8) == 0 ? 65535 : 0;
  if (const char* lb = std::getenv("SWITCHYARD_VK_LOOP_BUDGET")) {
    char* end = nullptr;
    lc.loop_budget = uint64_t(std::strtoull(lb, &end, 10));
    SY_CHECK(*lb >= '0' && *lb <= '9' && *end == 0, "vulkan",
             "expected SWITCHYARD_VK_LOOP_BUDGET=N (loop iterations, 0 for no limit), found '", lb,
             "'");
  }
  // An invocation's row (three passes at most) stays within a quarter of
  // the loop budget.
  if (lc.loop_budget) lc.short_row = std::min<int64_t>(lc.short_row, int64_t(lc.loop_budget / 12));
}

void Context::destroy() {
  if (dev) {
    if (pipe_layout) vk.vkDestroyPipelineLayout(dev, pipe_layout, nullptr);
    if (set_layout) vk.vkDestroyDescriptorSetLayout(dev, set_layout, nullptr);
    if (cmd_pool) vk.vkDestroyCommandPool(dev, cmd_pool, nullptr);
    vk.vkDestroyDevice(dev, nullptr);
  }
  // Back to the state before create(), so a failed set-up can be retried.
  dev = VK_NULL_HANDLE;
#ifdef VK_EXT_device_fault
  fault_info = nullptr;
#endif
  queue = VK_NULL_HANDLE;
  cmd_pool = VK_NULL_HANDLE;
  set_layout = VK_NULL_HANDLE;
  pipe_layout = VK_NULL_HANDLE;
}

}  // namespace switchyard::vk_impl
