// SPDX-License-Identifier: MIT
// The Vulkan recorder: a Program becomes recorded command buffers that are
// replayed every step.
//
// Binding: each launch has its own descriptor set: its buffer arguments
// bound to exactly the ranges it touches, its entry in a host-visible launch
// table (a uniform block with the kernel's scalars) and the status word.
// Sets are allocated once per recording; a step that binds other buffers
// rewrites only the descriptors that changed (update-after-bind where the
// device has it, else the command buffer is recorded again).
//
// Recording: a Program becomes one command buffer per frame (two, used
// alternately, so the host can fill one table while the other runs).
// Barriers come from per-range read/write hazards between launches.
// Pipelines are specialized per launch mode and flags (vk_pipelines.h).
//
// Status: kernels that check their input (cross_entropy's labels) set a bit
// in the status word; it is read when nothing is in flight and becomes the
// context's pending error.
#pragma once
#include <span>
#include <unordered_map>
#include <vector>

#include "vk_allocator.h"
#include "vk_pipelines.h"
#include "vk_profiler.h"
#include "vk_timeline.h"

namespace switchyard::vk_impl {

constexpr uint32_t kFrames = 2;  // recordings per Program, used alternately
constexpr size_t kMaxRecordings = 256;

struct Frame {
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> sets;            // one per launch
  std::vector<VkDescriptorBufferInfo> written;  // what the sets hold, kArgBindings per launch
  uint32_t op_base = 0;                         // first entry of this frame's launches in the table
  uint64_t serial = 0;                          // last submission using it
  bool recorded = false;
  bool profiled = false;  // recorded with timestamp queries
  bool named = false;     // its sets carry their launches' debug names
};

struct Recording {
  std::vector<uint32_t> key;  // pipelines, grid sizes and barriers recorded
  Frame frames[kFrames];
  uint32_t next = 0;
  uint64_t table_offset = 0, table_entries = 0;  // in table entries (op_stride_ bytes)
  std::vector<uint32_t> entry;                   // each launch's first entry in a frame's
  uint64_t last_step = 0;
};

class Recorder {
 public:
  Recorder(Context& c, Allocator& a, Timeline& t, Pipelines& p, Profiler& prof)
      : c_(c), alloc_(a), t_(t), pipes_(p), prof_(prof) {}

  // The status word and the launch table.
  void create();
  void execute(const Program& prog, std::span<const Binding> bind);
  // Frees every recording (before blocks their sets name are freed).
  void drop_all();
  // A retire hook: reads and resets the status word when nothing is in flight.
  void check_status();
  void destroy();

 private:
  void free_recording(Recording& rec);
  // Gives a frame's descriptor sets back to their pool (the frame must not
  // be in flight); it is recorded again at its next use.
  void free_sets(Frame& f);
  // n descriptor sets from one pool: an existing one, else a new pool,
  // else (the driver's memory or max_descriptor_sets exhausted) the sets of
  // the least recently run recordings, evicted one at a time.
  void allocate_sets(Frame& fr, size_t n);
  // Points the frame's sets at this step's buffers, writing only what
  // changed. Returns true if anything changed.
  bool write_sets(Frame& fr, size_t n);
  void evict_lru();
  uint64_t table_space(uint64_t entries);
  // The scratch of split reductions (plan_launches), at their first use.
  void allocate_scratch();
  // Records launches_ (parts of `instrs` Program instructions); query >= 0:
  // timestamps into queries [query, query + instrs + 1), one per instruction.
  void record(Frame& fr, size_t instrs, const std::vector<uint32_t>& key, int64_t query);

  Context& c_;
  Allocator& alloc_;
  Timeline& t_;
  Pipelines& pipes_;
  Profiler& prof_;
  // Each pool and the sets it has left, counted here: drivers may (lavapipe
  // does) allocate past a pool's maxSets instead of failing, which would
  // hide running out from the eviction below.
  struct Pool {
    VkDescriptorPool pool;
    uint32_t left;
  };
  std::vector<Pool> desc_pools_;
  uint64_t pool_sets_ = 0;  // sets desc_pools_ hold in all
  HostBuf status_, table_;
  Alloc* scratch_ = nullptr;  // LaunchConfig::scratch_bytes of device memory
  RangeAllocator table_ranges_;
  uint64_t op_stride_ = 128;  // bytes between table entries
  uint64_t step_ = 0;
  std::unordered_map<uint64_t, Recording> recordings_;
  // Reused every step: no allocation per step.
  std::vector<Launch> launches_;   // the step's dispatches (plan_launches)
  std::vector<Instr> parts_;       // the split launches' parts they point at
  std::vector<Launch> multi_tmp_;  // plan_multi's
  std::vector<OpParams> ops_;
  // Each launch's first table entry in its frame's (a multi-tensor launch
  // takes kMultiTableBytes), and the frame's entries at [n]; the
  // multi-tensor launches' tables, kMaxMultiTensors each.
  std::vector<uint32_t> entry_;
  std::vector<MultiEntry> multi_;
  std::vector<VkDescriptorBufferInfo> infos_;
  Hazards hazards_;
  std::vector<uint32_t> key_;
};

}  // namespace switchyard::vk_impl
