// VulkanDevice: the Vulkan backend's Device. Internal to backends/vulkan.
//
// The class is one object (one lock, one set of Vulkan handles); its member
// functions are defined in files by concept:
//   vk_device.cpp     set-up and teardown, settings, the backend entry point
//   vk_memory_ops.cpp blocks, suballocation, deferred frees, host buffers
//   vk_timeline.cpp   command buffers, fences, batching, submission serials
//   vk_transfer.cpp   uploads, downloads and copies (zero-copy or the staging ring)
//   vk_pipelines.cpp  pipelines per kernel, mode and flags; the on-disk cache
//   vk_recording.cpp  Programs: launch tables, descriptor sets, barriers, replay
//   vk_profiler.cpp   timestamp queries for the profiler
// Launch translation (params, descriptors, grids) is in vk_launch, instance
// and device facts in vk_instance, block bookkeeping in vk_memory.
//
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
#pragma once
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

using detail::cat;

constexpr uint32_t kTableBinding = 5, kStatusBinding = 6, kBindings = 7;
constexpr uint32_t kRingId = UINT32_MAX;  // Range id of the staging ring
constexpr uint32_t kFrames = 2;           // recordings per Program, used alternately
constexpr uint64_t kAlign = 256;          // suballocation alignment
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
  std::vector<VkDescriptorSet> sets;            // one per launch
  std::vector<VkDescriptorBufferInfo> written;  // what the sets hold, kArgBindings per launch
  uint32_t op_base = 0;                         // first entry of this frame's launches in the table
  uint64_t serial = 0;                          // last submission using it
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

class VulkanDevice final : public BackendDevice {
 public:
  VulkanDevice(std::shared_ptr<Instance> in, Physical p, int index, bool zero_copy)
      : BackendDevice(make_info(p, index, zero_copy)),
        in_(std::move(in)),
        p_(std::move(p)),
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
  bool supports(Kernel) const override { return true; }

 private:
  // ---- shared by the parts ----------------------------------------------------------
  static constexpr VkPipelineStageFlags kWork =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  static constexpr VkAccessFlags kWrites =
      VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  static constexpr VkAccessFlags kAll = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  // While the profiler is on, every copy and every launch writes timestamps
  // into a ring of queries; they are read back when their submission
  // completes and become the profiler's transfer and kernel events.
  bool profiling() { return ts_ok_ && profile::enabled(); }
  Buffer allocate_impl(size_t bytes) override { return allocate_in(bytes, false); }
  Buffer allocate_host_impl(size_t bytes) override { return allocate_in(bytes, true); }

  // ---- set-up and teardown (vk_device.cpp) ----------------------------------------

  void check(VkResult r, const char* op, const char* what);

  // Creates the logical device on first use. Set-up that fails (a bad
  // setting, out of memory) leaves nothing behind and throws each time.
  void ensure();

  void create();

  bool has_update_after_bind();

  void choose_tiles();

  void destroy();

  static void bump(uint64_t& c, uint64_t n = 1);

  void synchronize_impl() override;

  // ---- memory (vk_memory_ops.cpp) -------------------------------------------------

  // A VkBuffer of `size` bytes on its own allocation of the memory type
  // `type(memoryTypeBits)` picks, mapped when `map`, within the heap's size
  // when `budget` (then counted in heap_used_). False and `why` when the
  // device refuses; nothing is left behind.
  template <class PickType>
  bool create_memory(uint64_t size, PickType type, bool map, bool budget, Block& b,
                     std::string& why);

  HostBuf make_host_buffer(uint64_t size, bool want_device_local);

  void free_host_buffer(HostBuf& h);

  int block_type(uint32_t bits, bool host) const;

  // Blocks are bound by range, so they may exceed maxStorageBufferRange;
  // one tensor may not.
  uint64_t block_cap() const;

  // Creates a block of `size` bytes in slot `k`; false if the device refused.
  bool create_block(uint32_t k, uint64_t size, bool dedicated, bool host, std::string& why);

  void destroy_block(uint32_t k);

  // Returns empty blocks to the device (all of them when `all`, else only
  // dedicated ones). True if something was freed.
  bool trim(bool all);

  Alloc* try_allocate(uint64_t bytes, bool host, std::string& why);

  void free_alloc(Alloc* a);

  Buffer allocate_in(size_t bytes, bool host);

  void release_impl(Buffer b) override;

  // ---- submissions and their completion (vk_timeline.cpp) -------------------------

  VkFence get_fence();

  VkCommandBuffer get_cb();

  static void barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags src_access,
                      VkPipelineStageFlags dst, VkAccessFlags dst_access);

  // Every command buffer starts after all earlier work's writes are visible
  // and ends making its writes visible to the host.
  static void begin_cb(VkCommandBuffer cb);

  void end_cb(VkCommandBuffer cb);

  // The transfer command buffer collecting uploads and copies until the next
  // submission.
  VkCommandBuffer transfer_cb();

  void record_copy(VkBuffer src, Range rs, VkBuffer dst, Range rd, const char* kind);

  // Work is submitted in batches: the command buffers recorded since the
  // last vkQueueSubmit (transfers, at most one Program, the transfers after
  // it) go in one submission when the host must wait for them, or when the
  // next Program comes. So a training step (upload the batch, run the step,
  // read the loss back) is one vkQueueSubmit, and the device never lags the
  // host by more than one Program.
  void close_transfer();

  // Submits the batch; returns its serial.
  uint64_t flush();

  // Adds a recorded Program to the batch; returns the serial it will run as.
  uint64_t enqueue_program(VkCommandBuffer cb);

  // Completes finished submissions (waiting for all up to `upto`): frees what
  // they held, performs their host copies, checks the status word.
  void retire(bool all, uint64_t upto = 0);

  void wait_for(uint64_t serial);

  void throw_pending();

  void wait_idle();

  // ---- transfers (vk_transfer.cpp) ------------------------------------------------

  Range range_of(const Alloc* a, uint64_t off, uint64_t n, bool write) const;

  uint64_t ring_reserve(uint64_t n);

  void upload_impl(Buffer dst, size_t off, const void* src, size_t n) override;

  void download_impl(Buffer src, size_t off, void* dst, size_t n) override;

  void copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t n) override;

  // ---- pipelines (vk_pipelines.cpp) -----------------------------------------------

  std::string cache_path() const;

  // A VkPipelineCache kept on disk, so later runs skip shader compilation
  // where the driver supports it. The driver checks the header; a stale or
  // corrupt file is ignored by it.
  void load_pipeline_cache();

  void save_pipeline_cache();

  // A pipeline is one kernel's build (plain or subgroup) specialized for a
  // launch's mode and flags (SPEC_OP, SPEC_FLAGS in shaders/common.glsl).
  // Index of the pipeline for this launch (created when first recorded).
  uint32_t pipeline_index(const Instr& ins, uint32_t flags);

  VkPipeline pipeline(uint32_t idx);

  // ---- programs (vk_recording.cpp) ------------------------------------------------

  void free_recording(Recording& rec);

  // n descriptor sets from one pool (a new pool when the last is full).
  void allocate_sets(Frame& fr, size_t n);

  // Points the frame's sets at this step's buffers, writing only what
  // changed. Returns true if anything changed.
  bool write_sets(Frame& fr, size_t n);

  void evict_lru();

  uint64_t table_space(uint64_t entries);

  // query >= 0: write timestamps into queries [query, query + launches + 1).
  void record(Frame& fr, const Program& prog, const std::vector<uint32_t>& key, int64_t query);

  void execute_impl(const Program& prog, std::span<const Binding> bind) override;

  // ---- profiling: timestamp queries (vk_profiler.cpp) -----------------------------

  // First of n consecutive free queries, waiting for a submitted batch that
  // used them if needed. -1 (this work goes unmeasured) if n exceeds the
  // pool or the queries are the current batch's: waiting for those would
  // submit the batch under a caller that is still adding to it.
  int64_t query_reserve(uint32_t n);

  // Turns a completed submission's timestamps into profiler events. The
  // device clock is placed on the host's: a submission's first timestamp no
  // earlier than its vkQueueSubmit, its last no later than now.
  void harvest(InFlight& f);

  // A host-side transfer (zero-copy memcpy): timed on the host's clock.
  void host_transfer(const char* kind, size_t bytes, int64_t t0);

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
  LaunchConfig lc_;       // workgroup and tile sizes, limits (choose_tiles)
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
  bool ts_ok_ = false;        // the queue writes timestamps
  double ts_period_ = 1.0;    // ns per tick
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

}  // namespace switchyard::vk_impl
