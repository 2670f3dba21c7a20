// The Vulkan compute backend.
//
// Memory: tensors are suballocated from a few large blocks (one VkBuffer and
// one vkAllocateMemory each). Where the device has host-visible device-local
// memory (integrated GPUs, ReBAR, lavapipe) blocks are mapped and transfers
// are plain memcpy ("zero-copy"); otherwise, or with
// SWITCHYARD_VK_FORCE_STAGING=1, transfers go through a persistently mapped
// staging ring and vkCmdCopyBuffer, chunked when larger than the ring.
//
// Binding: each launch has its own descriptor set: its buffer arguments
// bound to exactly the ranges it touches, its entry in a host-visible launch
// table (a uniform block with the kernel's scalars) and a status word. Sets
// are allocated once per recording; a step that binds other buffers rewrites
// only the descriptors that changed (update-after-bind where the device has
// it, else the command buffer is recorded again).
//
// Recording: a Program becomes one command buffer (two, used alternately, so
// the host can fill one table while the other runs). Barriers come from
// per-range read/write hazards between launches. Pipelines are specialized
// per launch mode and flags (shaders/common.glsl). Uploads, the Program and
// the downloads after it go in one vkQueueSubmit when the host must wait or
// the next Program comes.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend_api.h"
#include "switchyard/dtype.h"
#include "switchyard/error.h"
#include "switchyard/profile.h"
#include "vk_instance.h"
#include "vk_launch.h"
#include "vk_loader.h"
#include "vk_memory.h"
#include "vk_spirv.h"

namespace switchyard::vk_impl {
namespace {

using detail::cat;

constexpr uint32_t kTableBinding = 5, kStatusBinding = 6, kBindings = 7;
constexpr uint32_t kRingId = UINT32_MAX;  // Range id of the staging ring
constexpr uint32_t kFrames = 2;      // recordings per Program, used alternately
constexpr uint64_t kAlign = 256;     // suballocation alignment
constexpr uint64_t kFirstBlock = 64ull << 20;
constexpr uint64_t kRingBytes = 32ull << 20;
constexpr uint64_t kRingChunk = 8ull << 20;
constexpr size_t kMaxRecordings = 256;
constexpr uint32_t kQueries = 8192;  // timestamp queries while profiling

// ---- the device ------------------------------------------------------------------

// A host-visible helper buffer (staging ring, parameter table, status).
struct HostBuf {
  VkDeviceMemory mem = VK_NULL_HANDLE;
  VkBuffer buf = VK_NULL_HANDLE;
  uint64_t size = 0;
  char* mapped = nullptr;
};

struct Frame {
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> sets;             // one per launch
  std::vector<VkDescriptorBufferInfo> written;   // what the sets hold, kArgBindings per launch
  uint32_t op_base = 0;  // first entry of this frame's launches in the table
  uint64_t serial = 0;   // last submission using it
  bool recorded = false;
  bool profiled = false;  // recorded with timestamp queries
};

struct Recording {
  std::vector<uint32_t> key;  // pipelines, grid sizes and barriers recorded
  Frame frames[kFrames];
  uint32_t next = 0;
  uint64_t table_offset = 0, table_entries = 0;  // in table entries (op_stride_ bytes)
  uint64_t last_step = 0;
};

// Timestamps one submission wrote while profiling: a Program (one before its
// first launch and one after each) or a copy (before and after).
struct ProfRec {
  uint32_t first = 0, count = 0;
  std::vector<Kernel> kernels;  // a Program's launches; empty for a copy
  const char* name = nullptr;   // a copy's transfer kind
  uint64_t bytes = 0;
};

struct InFlight {
  uint64_t serial;
  VkFence fence;
  std::vector<VkCommandBuffer> transfer_cbs;  // recycled when it completes
  std::vector<ProfRec> prof;                  // read back when it completes
  int64_t submit_ns = 0;                      // profiler clock at vkQueueSubmit
};

struct HostCopy {
  uint64_t serial;
  const char* src;
  void* dst;
  size_t bytes;
};

struct RingSeg {
  uint64_t begin, end, serial;
};

bool has_subgroup_variant(Kernel k) {
  return k == Kernel::reduce_sum || k == Kernel::softmax || k == Kernel::softmax_backward ||
         k == Kernel::cross_entropy;
}

class VulkanDevice final : public Device {
 public:
  VulkanDevice(std::shared_ptr<Instance> in, Physical p, int index, bool zero_copy)
      : Device(make_info(p, index, zero_copy)), in_(std::move(in)), p_(std::move(p)),
        zero_copy_(zero_copy) {
    std::lock_guard lock(in_->mu);
    in_->counters.push_back(&counters_.validation_messages);
  }
  ~VulkanDevice() override {
    {
      std::lock_guard lock(in_->mu);
      std::erase(in_->counters, &counters_.validation_messages);
    }
    try {
      destroy();
    } catch (...) {
    }
  }

  // At exit (see shutdown_at_exit): everything Vulkan is destroyed; later
  // releases just drop their records, other use is an error.
  void shutdown() {
    std::lock_guard lock(mu_);
    destroy();
    shut_down_ = true;
  }

  // Mapped memory: every block in the zero-copy mode, host blocks (pinned
  // memory) in both.
  void* host_pointer(Buffer b) override {
    if (!b) return nullptr;
    std::lock_guard lock(mu_);
    if (!dev_) return nullptr;
    auto* a = static_cast<Alloc*>(b.handle);
    char* m = blocks_[a->block].mapped;
    return m ? m + a->offset : nullptr;
  }
  void wait_until_unused(Buffer b) override {
    if (!b) return;
    std::lock_guard lock(mu_);
    if (!dev_) return;
    wait_for(static_cast<Alloc*>(b.handle)->last_use);
  }
  bool supports(Kernel k) const override { return k < Kernel::count_; }

 private:
  // ---- set-up ---------------------------------------------------------------
  void check(VkResult r, const char* op, const char* what) {
    if (r == VK_SUCCESS) return;
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
      throw OutOfMemory(cat("[", op, "] ", what, " on ", str(), " failed: ", result_name(r)));
    if (r == VK_ERROR_DEVICE_LOST) lost_ = true;
    throw Error(cat("[", op, "] ", what, " on ", str(), " failed: ", result_name(r)));
  }

  // Creates the logical device on first use. Set-up that fails (a bad
  // setting, out of memory) leaves nothing behind and throws each time.
  void ensure() {
    if (shut_down_) throw Error(cat("[vulkan] ", str(), " was shut down (the program is exiting)"));
    if (ready_) {
      if (lost_) throw Error(cat("[vulkan] ", str(), " was lost (VK_ERROR_DEVICE_LOST) and cannot be used"));
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

  void create() {
    float prio = 1.f;
    VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    q.queueFamilyIndex = p_.queue_family;
    q.queueCount = 1;
    q.pQueuePriorities = &prio;
    VkPhysicalDeviceFeatures f{};
    VkPhysicalDeviceDescriptorIndexingFeatures di{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_INDEXING_FEATURES};
    bool di_api = p_.api >= VK_API_VERSION_1_2 || has_ext(p_.exts, "VK_EXT_descriptor_indexing");
    if (di_api) {
      VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
      f2.pNext = &di;
      vk.vkGetPhysicalDeviceFeatures2(p_.pd, &f2);
    }
    uab_feature_ = di_api && di.descriptorBindingStorageBufferUpdateAfterBind;
    VkPhysicalDeviceDescriptorIndexingFeatures enable_di{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_INDEXING_FEATURES};
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
      b[k] = {k, k == kTableBinding ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
              VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
      bflags[k] = k < kArgBindings ? VK_DESCRIPTOR_BINDING_UPDATE_AFTER_BIND_BIT : 0;
    }
    VkDescriptorSetLayoutBindingFlagsCreateInfo fci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO};
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

  bool has_update_after_bind() {
    if (env_on("SWITCHYARD_VK_NO_UPDATE_AFTER_BIND")) return false;
    if (p_.api < VK_API_VERSION_1_2 && !has_ext(p_.exts, "VK_EXT_descriptor_indexing")) return false;
    return uab_feature_;
  }

  void choose_tiles() {
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
    gemm_ = cpu_like ? std::array<uint32_t, 5>{128, 128, 16, 32, 8} : std::array<uint32_t, 5>{64, 64, 16, 4, 4};
    gemm_small_ = cpu_like ? std::array<uint32_t, 5>{64, 64, 16, 16, 8} : std::array<uint32_t, 5>{32, 32, 16, 4, 4};
    for (auto* t : {&gemm_, &gemm_small_})
      while (((*t)[0] / (*t)[3]) * ((*t)[1] / (*t)[4]) > maxwg) (*t)[3] *= 2, (*t)[4] *= 2;
    if (const char* e = std::getenv("SWITCHYARD_VK_GEMM_TILE")) {
      uint32_t t[5];
      SY_CHECK(std::sscanf(e, "%u,%u,%u,%u,%u", &t[0], &t[1], &t[2], &t[3], &t[4]) == 5, "vulkan",
               "expected SWITCHYARD_VK_GEMM_TILE=BM,BN,BK,TM,TN, found '", e, "'");
      uint32_t w = t[3] && t[4] ? (t[0] / t[3]) * (t[1] / t[4]) : 0;
      SY_CHECK(w > 0 && w <= maxwg && t[3] % 4 == 0 && t[4] % 4 == 0 && t[0] % t[3] == 0 &&
                   t[1] % t[4] == 0 && t[2] % 4 == 0 && 4 * t[2] * (t[0] + t[1]) <= L.maxComputeSharedMemorySize,
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
               (p_.subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) && sg_fits(gemm_) &&
               sg_fits(gemm_small_);
    use_subgroups_ = p_.subgroup_arith && !env_on("SWITCHYARD_VK_NO_SUBGROUPS");
  }

  // A VkBuffer of `size` bytes on its own allocation of the memory type
  // `type(memoryTypeBits)` picks, mapped when `map`, within the heap's size
  // when `budget` (then counted in heap_used_). False and `why` when the
  // device refuses; nothing is left behind.
  template <class PickType>
  bool create_memory(uint64_t size, PickType type, bool map, bool budget, Block& b, std::string& why) {
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = size;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
                VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkResult r = vk.vkCreateBuffer(dev_, &bci, nullptr, &b.buf);
    if (r != VK_SUCCESS) {
      why = cat("vkCreateBuffer of ", size, " bytes failed: ", result_name(r));
      b.buf = VK_NULL_HANDLE;
      return false;
    }
    auto fail = [&](std::string w) {
      if (b.mem) vk.vkFreeMemory(dev_, b.mem, nullptr);
      vk.vkDestroyBuffer(dev_, b.buf, nullptr);
      b.buf = VK_NULL_HANDLE, b.mem = VK_NULL_HANDLE;
      why = std::move(w);
      return false;
    };
    VkMemoryRequirements req;
    vk.vkGetBufferMemoryRequirements(dev_, b.buf, &req);
    int t = type(req.memoryTypeBits);
    if (t < 0) return fail("no suitable memory type");
    b.heap = p_.mem.memoryTypes[t].heapIndex;
    uint64_t heap_size = p_.mem.memoryHeaps[b.heap].size;
    if (budget && heap_used_[b.heap] + req.size > heap_size)
      return fail(cat("heap ", b.heap, " holds ", mib(heap_size), " and ", mib(heap_used_[b.heap]), " are in use"));
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = uint32_t(t);
    r = vk.vkAllocateMemory(dev_, &ai, nullptr, &b.mem);
    if (r != VK_SUCCESS) {
      b.mem = VK_NULL_HANDLE;
      return fail(cat("vkAllocateMemory of ", mib(req.size), " failed: ", result_name(r)));
    }
    bump(counters_.memory_allocations);
    vk.vkBindBufferMemory(dev_, b.buf, b.mem, 0);
    if (map) {
      void* ptr = nullptr;
      r = vk.vkMapMemory(dev_, b.mem, 0, VK_WHOLE_SIZE, 0, &ptr);
      if (r != VK_SUCCESS) return fail(cat("vkMapMemory failed: ", result_name(r)));
      b.mapped = static_cast<char*>(ptr);
    }
    b.size = size;
    b.bytes = req.size;
    if (budget) heap_used_[b.heap] += req.size;
    return true;
  }

  HostBuf make_host_buffer(uint64_t size, bool want_device_local) {
    Block b;
    std::string why;
    auto type = [&](uint32_t bits) {
      return pick_type(p_.mem, bits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                       want_device_local ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT : VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                       want_device_local ? 0 : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    };
    if (!create_memory(size, type, true, false, b, why))
      throw OutOfMemory(cat("[allocate] host-visible buffer of ", mib(size), " on ", str(), ": ", why));
    return {b.mem, b.buf, size, b.mapped};
  }

  void free_host_buffer(HostBuf& h) {
    if (h.buf) vk.vkDestroyBuffer(dev_, h.buf, nullptr);
    if (h.mem) vk.vkFreeMemory(dev_, h.mem, nullptr);
    h = HostBuf{};
  }


  std::string cache_path() const {
    const char* home = std::getenv("XDG_CACHE_HOME");
    std::string base = home && *home ? home : (std::getenv("HOME") ? std::string(std::getenv("HOME")) + "/.cache" : "");
    if (base.empty()) return "";
    char id[64];
    std::snprintf(id, sizeof id, "%08x_%08x_%08x", p_.props.vendorID, p_.props.deviceID,
                  p_.props.driverVersion);
    return base + "/switchyard/vk_pipelines_" + id + ".bin";
  }

  // A VkPipelineCache kept on disk, so later runs skip shader compilation
  // where the driver supports it. The driver checks the header; a stale or
  // corrupt file is ignored by it.
  void load_pipeline_cache() {
    std::vector<char> data;
    if (std::string path = cache_path(); !path.empty() && !env_on("SWITCHYARD_VK_NO_PIPELINE_CACHE")) {
      std::ifstream f(path, std::ios::binary);
      data.assign(std::istreambuf_iterator<char>(f), {});
    }
    VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    ci.initialDataSize = data.size();
    ci.pInitialData = data.empty() ? nullptr : data.data();
    if (vk.vkCreatePipelineCache(dev_, &ci, nullptr, &pipe_cache_) != VK_SUCCESS) {
      ci.initialDataSize = 0;
      ci.pInitialData = nullptr;
      vk.vkCreatePipelineCache(dev_, &ci, nullptr, &pipe_cache_);
    }
  }

  void save_pipeline_cache() {
    if (!pipe_cache_ || !new_pipelines_ || env_on("SWITCHYARD_VK_NO_PIPELINE_CACHE")) return;
    std::string path = cache_path();
    if (path.empty()) return;
    size_t n = 0;
    if (vk.vkGetPipelineCacheData(dev_, pipe_cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
    std::vector<char> data(n);
    if (vk.vkGetPipelineCacheData(dev_, pipe_cache_, &n, data.data()) != VK_SUCCESS) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    std::string tmp = path + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream f(tmp, std::ios::binary);
      f.write(data.data(), std::streamsize(n));
      if (!f) return;
    }
    std::filesystem::rename(tmp, path, ec);
  }

  void destroy() {
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

  static void bump(uint64_t& c, uint64_t n = 1) {
    std::atomic_ref<uint64_t>(c).fetch_add(n, std::memory_order_relaxed);
  }

  // ---- submissions and their completion ---------------------------------------
  VkFence get_fence() {
    if (!free_fences_.empty()) {
      VkFence f = free_fences_.back();
      free_fences_.pop_back();
      vk.vkResetFences(dev_, 1, &f);
      return f;
    }
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence f;
    check(vk.vkCreateFence(dev_, &fci, nullptr, &f), "submit", "vkCreateFence");
    return f;
  }

  VkCommandBuffer get_cb() {
    if (!free_cbs_.empty()) {
      VkCommandBuffer cb = free_cbs_.back();
      free_cbs_.pop_back();
      vk.vkResetCommandBuffer(cb, 0);
      return cb;
    }
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = cmd_pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBuffer cb;
    check(vk.vkAllocateCommandBuffers(dev_, &ai, &cb), "submit", "vkAllocateCommandBuffers");
    return cb;
  }

  static void barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags src_access,
                      VkPipelineStageFlags dst, VkAccessFlags dst_access) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = src_access;
    mb.dstAccessMask = dst_access;
    vk.vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }

  static constexpr VkPipelineStageFlags kWork =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  static constexpr VkAccessFlags kWrites = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  static constexpr VkAccessFlags kAll = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;

  // Every command buffer starts after all earlier work's writes are visible
  // and ends making its writes visible to the host.
  static void begin_cb(VkCommandBuffer cb) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vk.vkBeginCommandBuffer(cb, &bi);
    barrier(cb, kWork, kWrites, kWork, kAll);
  }
  void end_cb(VkCommandBuffer cb) {
    barrier(cb, kWork, kWrites, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    check(vk.vkEndCommandBuffer(cb), "submit", "vkEndCommandBuffer");
  }

  // The transfer command buffer collecting uploads and copies until the next
  // submission.
  VkCommandBuffer transfer_cb() {
    if (!open_cb_) {
      open_cb_ = get_cb();
      begin_cb(open_cb_);
      open_hazards_.seen.clear();
    }
    return open_cb_;
  }

  void record_copy(VkBuffer src, Range rs, VkBuffer dst, Range rd, const char* kind) {
    int64_t q = profiling() ? query_reserve(2) : -1;
    VkCommandBuffer cb = transfer_cb();
    if (open_hazards_.conflict(rs) || open_hazards_.conflict(rd)) {
      barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
              VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
      open_hazards_.seen.clear();
    }
    open_hazards_.seen.push_back(rs);
    open_hazards_.seen.push_back(rd);
    VkBufferCopy c{rs.begin, rd.begin, rd.end - rd.begin};
    if (q >= 0) {
      vk.vkCmdResetQueryPool(cb, qpool_, uint32_t(q), 2);
      vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool_, uint32_t(q));
    }
    vk.vkCmdCopyBuffer(cb, src, dst, 1, &c);
    if (q >= 0) {
      vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool_, uint32_t(q) + 1);
      ProfRec r;
      r.first = uint32_t(q), r.count = 2, r.name = kind, r.bytes = c.size;
      batch_prof_.push_back(std::move(r));
    }
  }

  // ---- profiling: timestamp queries -----------------------------------------------
  // While the profiler is on, every copy and every launch writes timestamps
  // into a ring of queries; they are read back when their submission
  // completes and become the profiler's transfer and kernel events.
  bool profiling() { return ts_ok_ && profile::enabled(); }

  // First of n consecutive free queries, waiting for a submitted batch that
  // used them if needed. -1 (this work goes unmeasured) if n exceeds the
  // pool or the queries are the current batch's: waiting for those would
  // submit the batch under a caller that is still adding to it.
  int64_t query_reserve(uint32_t n) {
    if (n > kQueries) return -1;
    if (!qpool_) {
      VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = kQueries;
      check(vk.vkCreateQueryPool(dev_, &qi, nullptr, &qpool_), "profile", "vkCreateQueryPool");
    }
    for (;;) {
      std::erase_if(query_segs_, [&](const RingSeg& g) { return g.serial <= done_serial_; });
      uint32_t begin = query_head_ + n > kQueries ? 0 : query_head_;
      uint64_t need = 0;
      for (auto& g : query_segs_)
        if (g.begin < begin + n && begin < g.end) need = std::max(need, g.serial);
      if (!need) {
        query_head_ = begin + n;
        query_segs_.push_back({begin, begin + n, next_serial_});
        return begin;
      }
      if (need >= next_serial_) return -1;
      retire(false, need);
    }
  }

  // Turns a completed submission's timestamps into profiler events. The
  // device clock is placed on the host's: a submission's first timestamp no
  // earlier than its vkQueueSubmit, its last no later than now.
  void harvest(InFlight& f) {
    if (f.prof.empty()) return;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    std::vector<std::vector<int64_t>> ns(f.prof.size());
    for (size_t k = 0; k < f.prof.size(); ++k) {
      const ProfRec& r = f.prof[k];
      std::vector<uint64_t> ticks(r.count);
      VkResult res = vk.vkGetQueryPoolResults(dev_, qpool_, r.first, r.count, r.count * 8, ticks.data(), 8,
                                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
      if (res != VK_SUCCESS) continue;  // a lost measurement, not an error of the program
      for (uint64_t t : ticks) {
        int64_t v = int64_t(double(t & ts_mask_) * ts_period_);
        ns[k].push_back(v);
        lo = std::min(lo, v), hi = std::max(hi, v);
      }
    }
    if (lo > hi) return;
    int64_t now = profile::now_ns();
    if (!ts_anchored_ || lo + ts_offset_ < f.submit_ns) ts_offset_ = f.submit_ns - lo, ts_anchored_ = true;
    if (hi + ts_offset_ > now) ts_offset_ = now - hi;
    std::string dev = str();
    for (size_t k = 0; k < f.prof.size(); ++k) {
      const ProfRec& r = f.prof[k];
      const std::vector<int64_t>& t = ns[k];
      if (t.size() != r.count) continue;
      for (uint32_t j = 0; j + 1 < r.count; ++j) {
        profile::Event e;
        e.track = r.kernels.empty() ? profile::Track::transfer : profile::Track::kernel;
        e.device = dev;
        e.name = r.kernels.empty() ? r.name : kernel_name(r.kernels[j]);
        e.start_ns = t[j] + ts_offset_;
        e.dur_ns = std::max<int64_t>(0, t[j + 1] - t[j]);
        e.bytes = r.bytes;
        e.device_clock = true;
        profile::record(std::move(e));
      }
    }
  }

  // A host-side transfer (zero-copy memcpy): timed on the host's clock.
  void host_transfer(const char* kind, size_t bytes, int64_t t0) {
    profile::record_since(profile::Track::transfer, *this, kind, t0, bytes);
  }


  // Work is submitted in batches: the command buffers recorded since the
  // last vkQueueSubmit (transfers, at most one Program, the transfers after
  // it) go in one submission when the host must wait for them, or when the
  // next Program comes. So a training step (upload the batch, run the step,
  // read the loss back) is one vkQueueSubmit, and the device never lags the
  // host by more than one Program.
  void close_transfer() {
    if (!open_cb_) return;
    end_cb(open_cb_);
    batch_.push_back(open_cb_);
    batch_transfer_.push_back(open_cb_);
    open_cb_ = VK_NULL_HANDLE;
  }

  // Submits the batch; returns its serial.
  uint64_t flush() {
    close_transfer();
    if (batch_.empty()) return next_serial_ - 1;
    VkFence fence = get_fence();
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = uint32_t(batch_.size());
    si.pCommandBuffers = batch_.data();
    int64_t submit_ns = profile::enabled() ? profile::now_ns() : 0;
    VkResult r;
    {
      profile::Span span(profile::Track::submission, "vkQueueSubmit", this);
      r = vk.vkQueueSubmit(queue_, 1, &si, fence);
    }
    if (r != VK_SUCCESS) {
      free_fences_.push_back(fence);
      batch_prof_.clear();
      check(r, "submit", "vkQueueSubmit");
    }
    bump(counters_.queue_submits);
    inflight_.push_back({next_serial_, fence, std::move(batch_transfer_), std::move(batch_prof_), submit_ns});
    batch_transfer_.clear();
    batch_prof_.clear();
    batch_.clear();
    batch_has_program_ = false;
    return next_serial_++;
  }

  // Adds a recorded Program to the batch; returns the serial it will run as.
  uint64_t enqueue_program(VkCommandBuffer cb) {
    if (batch_has_program_) flush();
    close_transfer();
    batch_.push_back(cb);
    batch_has_program_ = true;
    return next_serial_;
  }

  // Completes finished submissions (waiting for all up to `upto`): frees what
  // they held, performs their host copies, checks the status word.
  void retire(bool all, uint64_t upto = 0) {
    if (all) upto = next_serial_ - 1;
    while (!inflight_.empty()) {
      InFlight& f = inflight_.front();
      if (f.serial <= upto) {
        VkResult r = vk.vkWaitForFences(dev_, 1, &f.fence, VK_TRUE, UINT64_MAX);
        check(r, "synchronize", "vkWaitForFences");
      } else if (vk.vkGetFenceStatus(dev_, f.fence) != VK_SUCCESS) {
        break;
      }
      done_serial_ = f.serial;
      harvest(f);
      free_fences_.push_back(f.fence);
      for (VkCommandBuffer cb : f.transfer_cbs) free_cbs_.push_back(cb);
      inflight_.pop_front();
    }
    while (!host_copies_.empty() && host_copies_.front().serial <= done_serial_) {
      HostCopy& c = host_copies_.front();
      std::memcpy(c.dst, c.src, c.bytes);
      host_copies_.pop_front();
    }
    std::erase_if(ring_segs_, [&](const RingSeg& s) { return s.serial <= done_serial_; });
    std::erase_if(deferred_, [&](Alloc* a) {
      if (a->last_use > done_serial_) return false;
      free_alloc(a);
      return true;
    });
    // The status word is read and reset only when nothing that might set it
    // is in flight (the host's atomics do not order with the device's).
    std::atomic_ref<uint32_t> status(*reinterpret_cast<uint32_t*>(status_.mapped));
    if (inflight_.empty() && batch_.empty() && !open_cb_ && status.load() != 0) {
      uint32_t bits = status.exchange(0);
      if (bits & 1u)
        pending_error_ = cat("[cross_entropy] expected labels in [0, classes), found a label outside that "
                             "range on ", str(), " (the loss and its gradient are NaN)");
    }
  }

  void wait_for(uint64_t serial) {
    if (serial == 0) return;
    if (serial >= next_serial_) flush();
    serial = std::min(serial, next_serial_ - 1);  // nothing was recorded under it
    if (serial > done_serial_) retire(false, serial);
  }

  void throw_pending() {
    if (pending_error_.empty()) return;
    std::string e = std::move(pending_error_);
    pending_error_.clear();
    throw Error(e);
  }

  // ---- memory -------------------------------------------------------------------
  int block_type(uint32_t bits, bool host) const {
    if (host)  // pinned host memory: system memory the device reaches, cached for reads
      return pick_type(p_.mem, bits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                       VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (zero_copy_)
      return pick_type(p_.mem, bits,
                       VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                       VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
    int t = pick_type(p_.mem, bits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0,
                      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    return t >= 0 ? t : pick_type(p_.mem, bits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  }

  // Blocks are bound by range, so they may exceed maxStorageBufferRange;
  // one tensor may not.
  uint64_t block_cap() const {
    uint64_t cap = 1ull << 30;
    if (p_.maint3.maxMemoryAllocationSize) cap = std::min<uint64_t>(cap, p_.maint3.maxMemoryAllocationSize);
    return cap & ~(kAlign - 1);
  }

  // Creates a block of `size` bytes in slot `k`; false if the device refused.
  bool create_block(uint32_t k, uint64_t size, bool dedicated, bool host, std::string& why) {
    Block b;
    b.dedicated = dedicated;
    b.host = host;
    auto type = [&](uint32_t bits) { return block_type(bits, host); };
    if (!create_memory(size, type, zero_copy_ || host, true, b, why)) return false;
    b.ranges = RangeAllocator(size);
    if (!host) bump(counters_.bytes_reserved, b.bytes);
    blocks_[k] = std::move(b);
    return true;
  }

  void destroy_block(uint32_t k) {
    Block& b = blocks_[k];
    vk.vkDestroyBuffer(dev_, b.buf, nullptr);
    vk.vkFreeMemory(dev_, b.mem, nullptr);
    heap_used_[b.heap] -= b.bytes;
    if (!b.host) bump(counters_.bytes_reserved, uint64_t(0) - b.bytes);
    blocks_[k] = Block{};
  }

  void wait_idle() {
    flush();
    retire(true);
  }

  // Returns empty blocks to the device (all of them when `all`, else only
  // dedicated ones). True if something was freed.
  bool trim(bool all) {
    bool any = false;
    for (auto& b : blocks_)
      if (b.buf && b.ranges.empty() && (all || b.dedicated)) any = true;
    if (!any) return false;
    // Recorded descriptor sets may name the buffers: drop the recordings.
    wait_idle();
    for (auto& [id, rec] : recordings_) free_recording(rec);
    recordings_.clear();
    for (uint32_t k = 0; k < blocks_.size(); ++k)
      if (blocks_[k].buf && blocks_[k].ranges.empty() && (all || blocks_[k].dedicated)) destroy_block(k);
    return true;
  }

  Alloc* try_allocate(uint64_t bytes, bool host, std::string& why) {
    uint64_t cap = block_cap();
    if (bytes <= cap / 2) {
      for (uint32_t k = 0; k < blocks_.size(); ++k)
        if (blocks_[k].buf && !blocks_[k].dedicated && blocks_[k].host == host)
          if (auto off = blocks_[k].ranges.allocate(bytes, kAlign)) return new Alloc{k, *off, bytes, 0};
    }
    int slot = -1;
    for (uint32_t k = 0; k < blocks_.size() && slot < 0; ++k)
      if (!blocks_[k].buf) slot = int(k);
    if (slot < 0) {
      slot = int(blocks_.size());
      blocks_.emplace_back();
    }
    bool dedicated = bytes > cap / 2;
    uint64_t size = (bytes + (1ull << 16) - 1) & ~((1ull << 16) - 1);
    if (!dedicated) {
      // Blocks grow: 64 MiB (16 MiB for host memory), then twice the last, up to 1 GiB.
      uint64_t last = 0;
      for (auto& b : blocks_)
        if (b.buf && !b.dedicated && b.host == host) last = std::max(last, b.size);
      size = std::max(size, std::min(cap, last ? 2 * last : host ? kFirstBlock / 4 : kFirstBlock));
    }
    // Near the heap's end a grown block may not fit: halve it, down to the
    // allocation itself.
    uint64_t least = (bytes + (1ull << 16) - 1) & ~((1ull << 16) - 1);
    while (!create_block(uint32_t(slot), size, dedicated, host, why)) {
      if (dedicated || size <= least) return nullptr;
      size = std::max(least, size / 2);
    }
    if (dedicated) {
      blocks_[slot].ranges.allocate(bytes, kAlign);
      return new Alloc{uint32_t(slot), 0, bytes, 0};
    }
    auto off = blocks_[slot].ranges.allocate(bytes, kAlign);
    if (!off) {  // cannot happen: the block was sized for it
      why = cat("a new block of ", size, " bytes has no room for ", bytes);
      return nullptr;
    }
    return new Alloc{uint32_t(slot), *off, bytes, 0};
  }

  void free_alloc(Alloc* a) {
    blocks_[a->block].ranges.free(a->offset, a->size);
    if (blocks_[a->block].dedicated) dead_dedicated_ = true;
    delete a;
  }

  Buffer allocate_impl(size_t bytes) override { return allocate_in(bytes, false); }
  Buffer allocate_host_impl(size_t bytes) override { return allocate_in(bytes, true); }

  Buffer allocate_in(size_t bytes, bool host) {
    std::lock_guard lock(mu_);
    ensure();
    retire(false);
    if (dead_dedicated_) {
      dead_dedicated_ = false;
      trim(false);
    }
    std::string why;
    Alloc* a = try_allocate(bytes, host, why);
    if (!a) {
      // Finish queued work (its frees land in their blocks) and retry; then
      // give empty blocks back and retry once more.
      wait_idle();
      a = try_allocate(bytes, host, why);
      if (!a && trim(true)) a = try_allocate(bytes, host, why);
    }
    if (!a)
      throw OutOfMemory(cat(host ? "[allocate_host] out of pinned host memory on " : "[allocate] out of device memory on ",
                            str(), ": expected ", bytes, " bytes (", mib(bytes), ") to fit, found ", why));
    return {a, bytes};
  }

  void release_impl(Buffer b) override {
    std::lock_guard lock(mu_);
    auto* a = static_cast<Alloc*>(b.handle);
    if (!dev_) {  // shut down: the memory went with the device
      delete a;
      return;
    }
    if (a->last_use > done_serial_) deferred_.push_back(a);
    else free_alloc(a);
  }

  // ---- transfers -----------------------------------------------------------------
  Range range_of(const Alloc* a, uint64_t off, uint64_t n, bool write) const {
    return {a->block, a->offset + off, a->offset + off + n, write};
  }

  uint64_t ring_reserve(uint64_t n) {
    if (!ring_.buf) ring_ = make_host_buffer(kRingBytes, false);
    n = (n + 15) & ~uint64_t(15);
    for (;;) {
      uint64_t begin = ring_head_ + n > ring_.size ? 0 : ring_head_;
      uint64_t need = 0;
      for (auto& s : ring_segs_)
        if (s.begin < begin + n && begin < s.end) need = std::max(need, s.serial);
      if (!need) {
        ring_head_ = begin + n;
        ring_segs_.push_back({begin, begin + n, next_serial_});
        return begin;
      }
      wait_for(need);
    }
  }

  void upload_impl(Buffer dst, size_t off, const void* src, size_t n) override {
    std::lock_guard lock(mu_);
    ensure();
    auto* a = static_cast<Alloc*>(dst.handle);
    if (zero_copy_) {
      wait_for(a->last_use);  // queued readers and writers of it first
      int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
      std::memcpy(blocks_[a->block].mapped + a->offset + off, src, n);
      if (t0 >= 0) host_transfer("upload (zero-copy)", n, t0);
      return;
    }
    const char* s = static_cast<const char*>(src);
    for (size_t done = 0; done < n;) {
      size_t c = std::min<size_t>(kRingChunk, n - done);
      uint64_t r = ring_reserve(c);
      std::memcpy(ring_.mapped + r, s + done, c);
      record_copy(ring_.buf, {kRingId, r, r + c, false}, blocks_[a->block].buf,
                  range_of(a, off + done, c, true), "upload (staging)");
      a->last_use = next_serial_;
      done += c;
      if (n > kRingChunk) flush();  // large: overlap the next memcpy with this copy
    }
  }

  void download_impl(Buffer src, size_t off, void* dst, size_t n) override {
    std::lock_guard lock(mu_);
    ensure();
    auto* a = static_cast<Alloc*>(src.handle);
    if (zero_copy_) {
      wait_for(a->last_use);
      throw_pending();
      int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
      std::memcpy(dst, blocks_[a->block].mapped + a->offset + off, n);
      if (t0 >= 0) host_transfer("download (zero-copy)", n, t0);
      return;
    }
    char* d = static_cast<char*>(dst);
    for (size_t done = 0; done < n;) {
      size_t c = std::min<size_t>(kRingChunk, n - done);
      uint64_t r = ring_reserve(c);
      record_copy(blocks_[a->block].buf, range_of(a, off + done, c, false), ring_.buf,
                  {kRingId, r, r + c, true}, "download (staging)");
      a->last_use = next_serial_;
      host_copies_.push_back({next_serial_, ring_.mapped + r, d + done, c});
      done += c;
      if (n > kRingChunk) flush();
    }
  }

  void copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t n) override {
    std::lock_guard lock(mu_);
    ensure();
    auto* s = static_cast<Alloc*>(src.handle);
    auto* d = static_cast<Alloc*>(dst.handle);
    if (n == 0) return;
    Range rs = range_of(s, so, n, false), rd = range_of(d, dof, n, true);
    const char* kind = blocks_[s->block].host   ? "copy (pinned to device)"
                       : blocks_[d->block].host ? "copy (device to pinned)"
                                                : "copy (device)";
    if (overlaps(rs, rd)) {
      // vkCmdCopyBuffer forbids overlapping regions (the CPU backend's copy
      // is a memmove): go through a temporary range, freed when done.
      std::string why;
      Alloc* tmp = try_allocate(n, false, why);
      if (!tmp) throw OutOfMemory(cat("[copy] no room for a ", n, "-byte temporary on ", str(), ": ", why));
      Range rt = range_of(tmp, 0, n, true);
      record_copy(blocks_[s->block].buf, rs, blocks_[tmp->block].buf, rt, kind);
      rt.write = false;
      record_copy(blocks_[tmp->block].buf, rt, blocks_[d->block].buf, rd, kind);
      tmp->last_use = s->last_use = d->last_use = next_serial_;
      deferred_.push_back(tmp);
      return;
    }
    record_copy(blocks_[s->block].buf, rs, blocks_[d->block].buf, rd, kind);
    s->last_use = d->last_use = next_serial_;
  }

  void synchronize_impl() override {
    std::lock_guard lock(mu_);
    if (!dev_) return;
    wait_idle();
    throw_pending();
  }

  // ---- programs --------------------------------------------------------------------
  // A pipeline is one kernel's build (plain or subgroup) specialized for a
  // launch's mode and flags (SPEC_OP, SPEC_FLAGS in shaders/common.glsl).
  // Index of the pipeline for this launch (created when first recorded).
  uint32_t pipeline_index(const Instr& ins, uint32_t flags) {
    Kernel k = ins.kernel;
    bool sg = k == Kernel::gemm ? gemm_sg_ : use_subgroups_ && has_subgroup_variant(k);
    uint64_t key = pipeline_key(k, sg, spec_op(ins), flags);
    auto [it, fresh] = pipeline_index_.try_emplace(key, uint32_t(pipelines_.size()));
    if (fresh) pipelines_.push_back({key, VK_NULL_HANDLE});
    return it->second;
  }

  VkPipeline pipeline(uint32_t idx) {
    auto& [key, pl] = pipelines_[idx];
    if (pl) return pl;
    Kernel k = Kernel(key & 0xff);
    bool sg = (key >> 8) & 1;
    std::string name = std::string(kernel_name(k)) + (sg ? "_sg" : "");
    const SpirvModule* m = nullptr;
    for (size_t j = 0; j < kSpirvModuleCount; ++j)
      if (name == kSpirvModules[j].name) m = &kSpirvModules[j];
    SY_CHECK(m, kernel_name(k), "expected an embedded shader '", name, "' in this build, found none");
    VkShaderModuleCreateInfo sci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    sci.codeSize = m->words * 4;
    sci.pCode = m->code;
    VkShaderModule mod;
    check(vk.vkCreateShaderModule(dev_, &sci, nullptr, &mod), kernel_name(k), "vkCreateShaderModule");
    // constant_id 0: workgroup size; 1-5: gemm tiles; 10: SPEC_OP; 11: SPEC_FLAGS.
    uint32_t spec[8] = {lc_.wg};
    uint32_t ids[8] = {0};
    uint32_t nspec = 1;
    if (k == Kernel::gemm) {
      const auto& t = (key >> 32) & kSmallTiles ? lc_.gemm_small : lc_.gemm;
      spec[0] = (t[0] / t[3]) * (t[1] / t[4]);
      for (uint32_t j = 0; j < 5; ++j) spec[nspec] = t[j], ids[nspec++] = j + 1;
    }
    uint32_t op16 = uint32_t((key >> 16) & 0xffff);
    spec[nspec] = op16 & 0x8000 ? op16 | 0xffff0000u : op16, ids[nspec++] = 10;  // sign-extended
    spec[nspec] = uint32_t(key >> 32), ids[nspec++] = 11;
    VkSpecializationMapEntry entries[8];
    for (uint32_t j = 0; j < nspec; ++j) entries[j] = {ids[j], j * 4, 4};
    VkSpecializationInfo si{nspec, entries, nspec * 4, spec};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = mod;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = &si;
    ci.layout = pipe_layout_;
    VkResult r = vk.vkCreateComputePipelines(dev_, pipe_cache_, 1, &ci, nullptr, &pl);
    vk.vkDestroyShaderModule(dev_, mod, nullptr);
    check(r, kernel_name(k), "vkCreateComputePipelines");
    new_pipelines_ = true;
    return pl;
  }

  void free_recording(Recording& rec) {
    for (auto& f : rec.frames) {
      if (f.cb) vk.vkFreeCommandBuffers(dev_, cmd_pool_, 1, &f.cb), f.cb = VK_NULL_HANDLE;
      if (!f.sets.empty()) vk.vkFreeDescriptorSets(dev_, f.pool, uint32_t(f.sets.size()), f.sets.data());
      f.sets.clear();
      f.written.clear();
    }
    if (rec.table_entries) table_ranges_.free(rec.table_offset, rec.table_entries);
    rec.table_entries = 0;
  }

  // n descriptor sets from one pool (a new pool when the last is full).
  void allocate_sets(Frame& fr, size_t n) {
    std::vector<VkDescriptorSetLayout> layouts(n, set_layout_);
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorSetCount = uint32_t(n);
    ai.pSetLayouts = layouts.data();
    fr.sets.assign(n, VK_NULL_HANDLE);
    for (int attempt = 0; attempt < 2; ++attempt) {
      // Newest pool first; sets freed by evicted recordings return to theirs.
      for (auto pool = desc_pools_.rbegin(); pool != desc_pools_.rend(); ++pool) {
        ai.descriptorPool = *pool;
        VkResult r = vk.vkAllocateDescriptorSets(dev_, &ai, fr.sets.data());
        if (r == VK_SUCCESS) {
          fr.pool = *pool;
          fr.written.assign(n * kArgBindings, VkDescriptorBufferInfo{});
          bump(counters_.descriptor_set_allocations, n);
          return;
        }
        if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
          check(r, "execute", "vkAllocateDescriptorSets");
      }
      uint32_t sets = uint32_t(std::max<size_t>(1024, n));
      VkDescriptorPoolSize ps[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * (kBindings - 1)},
                                    {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, sets}};
      VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      ci.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT |
                 (uab_ ? VK_DESCRIPTOR_POOL_CREATE_UPDATE_AFTER_BIND_BIT : 0);
      ci.maxSets = sets;
      ci.poolSizeCount = 2;
      ci.pPoolSizes = ps;
      VkDescriptorPool pool;
      check(vk.vkCreateDescriptorPool(dev_, &ci, nullptr, &pool), "execute", "vkCreateDescriptorPool");
      desc_pools_.push_back(pool);
    }
    fr.sets.clear();
    throw Error(cat("[execute] could not allocate ", n, " descriptor sets on ", str()));
  }

  // Points the frame's sets at this step's buffers, writing only what
  // changed. Returns true if anything changed.
  bool write_sets(Frame& fr, size_t n) {
    std::vector<VkWriteDescriptorSet> w;
    bool fresh = fr.written.empty() || fr.written[0].buffer == VK_NULL_HANDLE;
    std::vector<VkDescriptorBufferInfo> table(fresh ? n : 0);
    VkDescriptorBufferInfo status{status_.buf, 0, VK_WHOLE_SIZE};
    for (size_t j = 0; j < n; ++j)
      for (uint32_t b = 0; b < kArgBindings; ++b) {
        const VkDescriptorBufferInfo& now = infos_[j * kArgBindings + b];
        VkDescriptorBufferInfo& had = fr.written[j * kArgBindings + b];
        if (!fresh && had.buffer == now.buffer && had.offset == now.offset && had.range == now.range) continue;
        had = now;
        VkWriteDescriptorSet x{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        x.dstSet = fr.sets[j];
        x.dstBinding = b;
        x.descriptorCount = 1;
        x.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        x.pBufferInfo = &had;
        w.push_back(x);
      }
    if (fresh)
      for (size_t j = 0; j < n; ++j) {
        table[j] = {table_.buf, (fr.op_base + j) * op_stride_, sizeof(OpParams)};
        for (uint32_t b : {kTableBinding, kStatusBinding}) {
          VkWriteDescriptorSet x{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
          x.dstSet = fr.sets[j];
          x.dstBinding = b;
          x.descriptorCount = 1;
          x.descriptorType = b == kTableBinding ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
          x.pBufferInfo = b == kTableBinding ? &table[j] : &status;
          w.push_back(x);
        }
      }
    if (!w.empty()) vk.vkUpdateDescriptorSets(dev_, uint32_t(w.size()), w.data(), 0, nullptr);
    return !w.empty();
  }

  void evict_lru() {
    auto lru = std::min_element(recordings_.begin(), recordings_.end(), [](auto& a, auto& b) {
      return a.second.last_step < b.second.last_step;
    });
    for (auto& f : lru->second.frames) wait_for(f.serial);
    free_recording(lru->second);
    recordings_.erase(lru);
  }

  uint64_t table_space(uint64_t entries) {
    for (;;) {
      if (auto off = table_ranges_.allocate(entries, 1)) return *off;
      if (!recordings_.empty()) {
        evict_lru();
        continue;
      }
      wait_idle();
      uint64_t size = std::max<uint64_t>(table_.size * 2, entries * op_stride_ * 2);
      HostBuf bigger = make_host_buffer(size, true);  // first: if it throws, nothing changed
      free_host_buffer(table_);
      table_ = bigger;
      table_ranges_ = RangeAllocator(size / op_stride_);
    }
  }

  // query >= 0: write timestamps into queries [query, query + launches + 1).
  void record(Frame& fr, const Program& prog, const std::vector<uint32_t>& key, int64_t query) {
    if (!fr.cb) {
      VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
      ai.commandPool = cmd_pool_;
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      check(vk.vkAllocateCommandBuffers(dev_, &ai, &fr.cb), "execute", "vkAllocateCommandBuffers");
    } else {
      vk.vkResetCommandBuffer(fr.cb, 0);
    }
    begin_cb(fr.cb);
    const uint32_t q = uint32_t(query);
    if (query >= 0) {
      vk.vkCmdResetQueryPool(fr.cb, qpool_, q, uint32_t(prog.instrs.size() + 1));
      vk.vkCmdWriteTimestamp(fr.cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool_, q);
    }
    VkPipeline bound = VK_NULL_HANDLE;
    for (size_t j = 0; j < prog.instrs.size(); ++j) {
      const uint32_t* e = &key[j * 5];  // pipeline, gx, gy, gz, barrier
      if (e[4])
        barrier(fr.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      VkPipeline pl = pipeline(e[0]);
      if (pl != bound) vk.vkCmdBindPipeline(fr.cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl), bound = pl;
      vk.vkCmdBindDescriptorSets(fr.cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe_layout_, 0, 1, &fr.sets[j], 0,
                                 nullptr);
      vk.vkCmdDispatch(fr.cb, e[1], e[2], e[3]);
      if (query >= 0)
        vk.vkCmdWriteTimestamp(fr.cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool_, q + uint32_t(j) + 1);
    }
    end_cb(fr.cb);
    fr.recorded = true;
    fr.profiled = query >= 0;
    bump(counters_.command_recordings);
  }

  void execute_impl(const Program& prog, std::span<const Binding> bind) override {
    std::lock_guard lock(mu_);
    ensure();
    if (prog.instrs.empty()) return;
    retire(false);
    if (dead_dedicated_) {
      dead_dedicated_ = false;
      trim(false);
    }
    // This step's table entries and descriptors, and what the recording must
    // look like: per launch its pipeline, grid and whether a barrier (from
    // read/write hazards on the ranges it touches) precedes it.
    size_t n = prog.instrs.size();
    ops_.resize(n);
    infos_.resize(n * kArgBindings);
    std::vector<uint32_t>& key = key_;
    key.assign(n * 5, 0);
    Hazards& hz = hazards_;  // reused: no allocation per step
    hz.seen.clear();
    Range ranges[kArgBindings + 1];
    for (size_t j = 0; j < n; ++j) {
      const Instr& ins = prog.instrs[j];
      int nr = 0;
      ops_[j] = launch_params(lc_, blocks_, ins, bind, &infos_[j * kArgBindings], ranges, nr);
      bool conflict = false;
      for (int a = 0; a < nr; ++a) conflict = conflict || hz.conflict(ranges[a]);
      if (conflict) hz.seen.clear();
      for (int a = 0; a < nr; ++a) hz.seen.push_back(ranges[a]);
      uint32_t g[3] = {1, 1, 1};
      launch_grid(lc_, ins, ops_[j].flags, g);
      uint32_t* e = &key[j * 5];
      e[0] = pipeline_index(ins, ops_[j].flags);
      e[1] = g[0], e[2] = g[1], e[3] = g[2];
      e[4] = conflict ? 1 : 0;
    }

    auto it = recordings_.find(prog.id);
    if (it == recordings_.end() || it->second.table_entries != n * kFrames) {
      if (it != recordings_.end()) {
        for (auto& f : it->second.frames) wait_for(f.serial);
        free_recording(it->second);
        recordings_.erase(it);
      }
      if (recordings_.size() >= kMaxRecordings) evict_lru();
      Recording rec;
      rec.table_offset = table_space(n * kFrames);
      rec.table_entries = n * kFrames;
      it = recordings_.emplace(prog.id, std::move(rec)).first;
    }
    Recording& rec = it->second;
    rec.last_step = ++step_;
    if (rec.key != key) {
      for (auto& f : rec.frames) f.recorded = false;
      rec.key = key;
    }
    uint32_t fi = rec.next;
    Frame& fr = rec.frames[fi];
    rec.next = (rec.next + 1) % kFrames;
    fr.op_base = uint32_t(rec.table_offset + fi * n);
    // Before waiting for this frame's last run, submit the Program waiting in
    // the batch, so the device works on it meanwhile.
    if (fr.serial > done_serial_ && batch_has_program_) flush();
    wait_for(fr.serial);  // its table entries, sets and command buffer are free again
    for (size_t j = 0; j < n; ++j)
      std::memcpy(table_.mapped + (fr.op_base + j) * op_stride_, &ops_[j], sizeof(OpParams));
    if (fr.sets.size() != n) allocate_sets(fr, n);
    // Without update-after-bind, writing a set invalidates the recording.
    if (write_sets(fr, n) && !uab_) fr.recorded = false;
    // While profiling, each run is recorded anew with its own queries. The
    // queries are tagged with the next serial, so the Program waiting in the
    // batch goes first (enqueue_program would submit it anyway), and this one
    // runs as that serial.
    const bool prof = profiling();
    if (prof && batch_has_program_) flush();
    int64_t query = prof ? query_reserve(uint32_t(n + 1)) : -1;
    if (query >= 0 || fr.profiled) fr.recorded = false;
    if (!fr.recorded) record(fr, prog, key, query);
    fr.serial = enqueue_program(fr.cb);
    if (query >= 0) {
      ProfRec r;
      r.first = uint32_t(query), r.count = uint32_t(n + 1);
      r.kernels.reserve(n);
      for (const Instr& ins : prog.instrs) r.kernels.push_back(ins.kernel);
      batch_prof_.push_back(std::move(r));
    }
    for (const Binding& b : bind)
      if (b.buffer) static_cast<Alloc*>(b.buffer.handle)->last_use = fr.serial;
  }

  std::shared_ptr<Instance> in_;
  Physical p_;
  bool zero_copy_;
  std::mutex mu_;
  VkDevice dev_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipe_layout_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> desc_pools_;
  bool uab_ = false, uab_feature_ = false;
  VkPipelineCache pipe_cache_ = VK_NULL_HANDLE;
  bool new_pipelines_ = false;
  bool lost_ = false;
  bool ready_ = false;  // ensure() completed
  bool shut_down_ = false;
  std::vector<std::pair<uint64_t, VkPipeline>> pipelines_;  // key, pipeline
  std::unordered_map<uint64_t, uint32_t> pipeline_index_;
  LaunchConfig lc_;  // workgroup and tile sizes, limits (choose_tiles)
  bool gemm_sg_ = false;  // gemm_sg build (see choose_tiles)
  bool use_subgroups_ = false;

  std::vector<Block> blocks_;
  uint64_t heap_used_[VK_MAX_MEMORY_HEAPS] = {};
  std::vector<Alloc*> deferred_;
  bool dead_dedicated_ = false;
  HostBuf status_, table_, ring_;
  RangeAllocator table_ranges_;
  uint64_t ring_head_ = 0;
  std::vector<RingSeg> ring_segs_;
  std::deque<HostCopy> host_copies_;

  uint64_t next_serial_ = 1, done_serial_ = 0;
  std::deque<InFlight> inflight_;
  std::vector<VkFence> free_fences_;
  std::vector<VkCommandBuffer> free_cbs_;
  VkCommandBuffer open_cb_ = VK_NULL_HANDLE;
  std::vector<VkCommandBuffer> batch_, batch_transfer_;
  bool batch_has_program_ = false;
  Hazards open_hazards_;
  // Profiling (timestamp queries).
  bool ts_ok_ = false;       // the queue writes timestamps
  double ts_period_ = 1.0;   // ns per tick
  uint64_t ts_mask_ = ~0ull;  // timestampValidBits
  VkQueryPool qpool_ = VK_NULL_HANDLE;
  uint32_t query_head_ = 0;
  std::vector<RingSeg> query_segs_;
  std::vector<ProfRec> batch_prof_;  // for the batch being collected
  bool ts_anchored_ = false;
  int64_t ts_offset_ = 0;  // device ns -> profiler ns
  std::string pending_error_;

  uint64_t step_ = 0;
  uint64_t op_stride_ = 128;  // bytes between table entries
  std::vector<VkDescriptorBufferInfo> infos_;
  std::unordered_map<uint64_t, Recording> recordings_;
  std::vector<OpParams> ops_;
  Hazards hazards_;
  std::vector<uint32_t> key_;
};

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
    e.devices.push_back(std::make_shared<VulkanDevice>(in, std::move(p), int(e.devices.size()), zero_copy));
  }
  live = new Live;
  live->instance = in;
  for (auto& d : e.devices) live->devices.push_back(std::static_pointer_cast<VulkanDevice>(d));
  std::atexit(shutdown_at_exit);
  e.available = !e.devices.empty();
  if (!e.available)
    e.reason = pds.empty() ? "no Vulkan device found (is a driver installed? mesa-vulkan-drivers provides "
                             "lavapipe; VK_ICD_FILENAMES may point elsewhere)"
                           : "no Vulkan device can run Switchyard: " + skipped;
  return e;
}

}  // namespace switchyard::detail
