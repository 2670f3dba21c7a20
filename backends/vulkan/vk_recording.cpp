// SPDX-License-Identifier: MIT
// The Vulkan recorder: launch tables, descriptor sets, barriers from
// hazards, recorded command buffers replayed every step (see vk_recording.h).
#include "vk_recording.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "switchyard/backend/custom.h"

namespace switchyard::vk_impl {

void Recorder::free_sets(Frame& f) {
  if (!f.sets.empty() && f.pool) {
    vk.vkFreeDescriptorSets(c_.dev, f.pool, uint32_t(f.sets.size()), f.sets.data());
    for (Pool& p : desc_pools_)
      if (p.pool == f.pool) p.left += uint32_t(f.sets.size());
  }
  f.sets.clear();
  f.written.clear();
  f.recorded = false;  // its command buffer names them
}

void Recorder::free_recording(Recording& rec) {
  for (auto& f : rec.frames) {
    if (f.cb) vk.vkFreeCommandBuffers(c_.dev, c_.cmd_pool, 1, &f.cb), f.cb = VK_NULL_HANDLE;
    free_sets(f);
  }
  if (rec.table_entries) table_ranges_.free(rec.table_offset, rec.table_entries);
  rec.table_entries = 0;
}

void Recorder::allocate_sets(Frame& fr, size_t n) {
  std::vector<VkDescriptorSetLayout> layouts(n, c_.set_layout);
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorSetCount = uint32_t(n);
  ai.pSetLayouts = layouts.data();
  fr.sets.assign(n, VK_NULL_HANDLE);
  fr.named = false;
  struct Clear {  // on any failure the frame holds no sets
    Frame& fr;
    bool ok = false;
    ~Clear() {
      if (!ok) fr.sets.clear();
    }
  } clear{fr};
  bool fresh = false;          // the last pass made a pool: it must give the sets
  VkResult made = VK_SUCCESS;  // why no pool gave them (for the message)
  for (;; made = VK_SUCCESS) {
    // Newest pool first; sets freed by evicted recordings return to theirs.
    for (auto pool = desc_pools_.rbegin(); pool != desc_pools_.rend(); ++pool) {
      if (pool->left < n) continue;
      ai.descriptorPool = pool->pool;
      VkResult r = vk.vkAllocateDescriptorSets(c_.dev, &ai, fr.sets.data());
      if (r == VK_SUCCESS) {
        fr.pool = pool->pool;
        pool->left -= uint32_t(n);
        clear.ok = true;
        fr.written.assign(n * kArgBindings, VkDescriptorBufferInfo{});
        bump(c_.counters.descriptor_set_allocations, n);
        return;
      }
      if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) {
        made = r;  // the driver's memory: evict rather than grow
        break;
      }
      if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
        c_.check(r, "execute", "vkAllocateDescriptorSets");
    }
    // A pool just made for them refusing them for want of room is a driver
    // bug, not something eviction fixes (out of memory is, below).
    SY_CHECK(!fresh || made != VK_SUCCESS, "execute", "expected a new descriptor pool to give ", n,
             " sets on ", c_.name(), ", found it refused them");
    fresh = false;
    // A new pool, within the budget; past it, or when the driver has no
    // memory for one, the least recently run recording other than this
    // one gives its sets back.
    const uint64_t most = c_.max_descriptor_sets ? c_.max_descriptor_sets : UINT32_MAX;
    const uint32_t sets =
        uint32_t(std::min<uint64_t>(std::max<size_t>(1024, n), most - std::min(most, pool_sets_)));
    VkDescriptorPool pool = VK_NULL_HANDLE;
    if (made == VK_SUCCESS) made = VK_ERROR_OUT_OF_POOL_MEMORY;  // the budget, unless tried
    if (made == VK_ERROR_OUT_OF_POOL_MEMORY && sets >= n) {
      VkDescriptorPoolSize ps[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * (kBindings - 1)},
                                    {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, sets}};
      VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      ci.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT |
                 (c_.uab ? VK_DESCRIPTOR_POOL_CREATE_UPDATE_AFTER_BIND_BIT : 0);
      ci.maxSets = sets;
      ci.poolSizeCount = 2;
      ci.pPoolSizes = ps;
      made = vk.vkCreateDescriptorPool(c_.dev, &ci, nullptr, &pool);
      if (made != VK_ERROR_OUT_OF_HOST_MEMORY && made != VK_ERROR_OUT_OF_DEVICE_MEMORY &&
          made != VK_ERROR_FRAGMENTATION_EXT)
        c_.check(made, "execute", "vkCreateDescriptorPool");
    }
    if (made == VK_SUCCESS) {
      c_.set_name(VK_OBJECT_TYPE_DESCRIPTOR_POOL, pool,
                  cat("descriptor pool ", desc_pools_.size(), " (", sets, " sets)"));
      desc_pools_.push_back({pool, sets});
      pool_sets_ += sets;
      fresh = true;
      continue;
    }
    if (recordings_.size() > 1) {  // this step's recording is the most recent
      evict_lru();
      continue;
    }
    // Last, the sets of this Program's other frame (it re-records when next used).
    bool freed = false;
    for (auto& [id, rec] : recordings_)
      for (Frame& f : rec.frames)
        if (&f != &fr && !f.sets.empty()) {
          t_.wait_for(f.serial);
          free_sets(f);
          freed = true;
        }
    if (freed) continue;
    throw OutOfMemory(cat(
        "[execute] expected ", n, " descriptor sets for one Program on ", c_.name(), ", found ",
        made == VK_ERROR_OUT_OF_POOL_MEMORY ? cat(pool_sets_,
                                                  " sets in all pools, the most "
                                                  "SWITCHYARD_VK_MAX_DESCRIPTOR_SETS allows")
                                            : cat("no memory for more (", result_name(made), ")"),
        ", and no other recording to evict"));
  }
}

bool Recorder::write_sets(Frame& fr, size_t n) {
  std::vector<VkWriteDescriptorSet> w;
  bool fresh = fr.written.empty() || fr.written[0].buffer == VK_NULL_HANDLE;
  std::vector<VkDescriptorBufferInfo> table(fresh ? n : 0);
  VkDescriptorBufferInfo status{status_.buf, 0, VK_WHOLE_SIZE};
  for (size_t j = 0; j < n; ++j)
    for (uint32_t b = 0; b < kArgBindings; ++b) {
      const VkDescriptorBufferInfo& now = infos_[j * kArgBindings + b];
      VkDescriptorBufferInfo& had = fr.written[j * kArgBindings + b];
      if (!fresh && had.buffer == now.buffer && had.offset == now.offset && had.range == now.range)
        continue;
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
      table[j] = {
          table_.buf, (fr.op_base + entry_[j]) * op_stride_,
          kernel_has(launches_[j].ins->kernel, kMultiTensor) ? kMultiTableBytes : sizeof(OpParams)};
      for (uint32_t b : {kTableBinding, kStatusBinding}) {
        VkWriteDescriptorSet x{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        x.dstSet = fr.sets[j];
        x.dstBinding = b;
        x.descriptorCount = 1;
        x.descriptorType = b == kTableBinding ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER
                                              : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        x.pBufferInfo = b == kTableBinding ? &table[j] : &status;
        w.push_back(x);
      }
    }
  if (!w.empty()) vk.vkUpdateDescriptorSets(c_.dev, uint32_t(w.size()), w.data(), 0, nullptr);
  return !w.empty();
}

void Recorder::evict_lru() {
  auto lru = std::min_element(recordings_.begin(), recordings_.end(), [](auto& a, auto& b) {
    return a.second.last_step < b.second.last_step;
  });
  for (auto& f : lru->second.frames) t_.wait_for(f.serial);
  free_recording(lru->second);
  recordings_.erase(lru);
  bump(c_.counters.recording_evictions);
}

uint64_t Recorder::table_space(uint64_t entries) {
  for (;;) {
    if (auto off = table_ranges_.allocate(entries, 1)) return *off;
    if (!recordings_.empty()) {
      evict_lru();
      continue;
    }
    t_.wait_idle();
    uint64_t size = std::max<uint64_t>(table_.size * 2, entries * op_stride_ * 2);
    HostBuf bigger =
        alloc_.host_buffer(size, MemRole::table);  // first: if it throws, nothing changed
    alloc_.free(table_);
    table_ = bigger;
    table_ranges_ = RangeAllocator(size / op_stride_);
  }
}

void Recorder::record(Frame& fr, size_t instrs, const std::vector<uint32_t>& key, int64_t query) {
  const size_t n = launches_.size();
  if (!fr.cb) {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = c_.cmd_pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    c_.check(vk.vkAllocateCommandBuffers(c_.dev, &ai, &fr.cb), "execute",
             "vkAllocateCommandBuffers");
    c_.set_name(VK_OBJECT_TYPE_COMMAND_BUFFER, fr.cb, "Program recording");
  } else {
    fr.recorded = false;
    c_.check(vk.vkResetCommandBuffer(fr.cb, 0), "execute", "vkResetCommandBuffer");
  }
  t_.begin_cb(fr.cb);
  const uint32_t q = uint32_t(query);
  if (query >= 0) {
    vk.vkCmdResetQueryPool(fr.cb, prof_.pool(), q, uint32_t(instrs + 1));
    vk.vkCmdWriteTimestamp(fr.cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, prof_.pool(), q);
  }
  VkPipeline bound = VK_NULL_HANDLE;
  // Each launch in a debug label naming its kernel, its Program
  // instruction and, for an instruction planned as several launches, which
  // one; its descriptor set named the same (once per set): validation
  // messages, RenderDoc and Nsight point at the launch.
  const bool label = c_.labels(), name = c_.in->debug_utils && !fr.named;
  size_t first = 0, last = 0;  // the current instruction's launches
  for (size_t j = 0; j < n; ++j) {
    std::string what;
    if (label || name) {
      const uint32_t at = launches_[j].instr;
      if (j == 0 || launches_[j - 1].instr != at) {
        first = last = j;
        while (last + 1 < n && launches_[last + 1].instr == at) ++last;
      }
      const Instr& li = *launches_[j].ins;
      // A custom kernel's label carries its name (validation messages name it).
      const std::string kname = custom_impl::display_name(li.params);
      what = cat(
          kname, " [instruction ", at, "]",
          last > first ? cat(" launch ", j - first + 1, " of ", last - first + 1) : std::string());
      if (name) c_.set_name(VK_OBJECT_TYPE_DESCRIPTOR_SET, fr.sets[j], what);
    }
    const uint32_t* e = &key[j * 5];  // pipeline, gx, gy, gz, barrier
    if (e[4])
      Timeline::barrier(fr.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                        VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    VkPipeline pl = pipes_.get(e[0]);
    if (pl != bound) vk.vkCmdBindPipeline(fr.cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl), bound = pl;
    vk.vkCmdBindDescriptorSets(fr.cb, VK_PIPELINE_BIND_POINT_COMPUTE, c_.pipe_layout, 0, 1,
                               &fr.sets[j], 0, nullptr);
    if (label) c_.begin_label(fr.cb, what);
    vk.vkCmdDispatch(fr.cb, e[1], e[2], e[3]);
    if (label) c_.end_label(fr.cb);
    // One timestamp per Program instruction, after its last part: the
    // profile counts kernels as the Program has them.
    const uint32_t at = launches_[j].instr;
    if (query >= 0 && (j + 1 == n || launches_[j + 1].instr != at))
      vk.vkCmdWriteTimestamp(fr.cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, prof_.pool(), q + at + 1);
  }
  t_.end_cb(fr.cb);
  fr.named = true;
  fr.recorded = true;
  fr.profiled = query >= 0;
  bump(c_.counters.command_recordings);
}

void Recorder::execute(const Program& prog, std::span<const Binding> bind) {
  if (prog.instrs.empty()) return;
  // This step's table entries and descriptors, and what the recording must
  // look like: per launch its pipeline, grid and whether a barrier (from
  // read/write hazards on the ranges it touches) precedes it. A launch may
  // be several dispatches (plan_launches).
  plan_launches(c_.lc, prog, launches_, parts_);
  plan_multi(c_.lc, alloc_.blocks(), prog, bind, launches_, multi_tmp_);
  size_t n = launches_.size();
  ops_.resize(n);
  infos_.resize(n * kArgBindings);
  entry_.resize(n + 1);
  entry_[0] = 0;
  const uint32_t multi_entries = uint32_t(ceil_div(kMultiTableBytes, op_stride_));
  size_t multis = 0;
  for (size_t j = 0; j < n; ++j) {
    const bool multi = kernel_has(launches_[j].ins->kernel, kMultiTensor);
    entry_[j + 1] = entry_[j] + (multi ? multi_entries : 1);
    multis += multi;
  }
  const size_t entries = entry_[n];
  multi_.resize(multis * kMaxMultiTensors);
  std::vector<uint32_t>& key = key_;
  key.assign(n * 5, 0);
  Hazards& hz = hazards_;  // reused: no allocation per step
  hz.seen.clear();
  Range ranges[kArgBindings + 2];
  for (size_t j = 0, m = 0; j < n; ++j) {
    const Instr& ins = *launches_[j].ins;
    if (launches_[j].scratch != kNoScratch && !scratch_) allocate_scratch();
    int nr = 0;
    if (kernel_has(ins.kernel, kMultiTensor))
      ops_[j] =
          multi_params(c_.lc, alloc_.blocks(), prog, launches_[j], bind,
                       &multi_[kMaxMultiTensors * m++], &infos_[j * kArgBindings], ranges, nr);
    else
      ops_[j] = launch_params(c_.lc, alloc_.blocks(), launches_[j], bind, scratch_,
                              &infos_[j * kArgBindings], ranges, nr);
    ops_[j].flags |= launches_[j].extra_flags;
    bool conflict = false;
    for (int a = 0; a < nr; ++a) conflict = conflict || hz.conflict(ranges[a]);
    if (conflict) hz.seen.clear();
    for (int a = 0; a < nr; ++a) hz.seen.push_back(ranges[a]);
    uint32_t g[3] = {1, 1, 1};
    launch_grid(c_.lc, ins, ops_[j].flags, ops_[j].aux, g);
    uint32_t* e = &key[j * 5];
    e[0] = pipes_.index(ins, ops_[j].flags);
    e[1] = g[0], e[2] = g[1], e[3] = g[2];
    e[4] = conflict ? 1 : 0;
  }
  // Every pipeline the Program needs, made now (several at once), so the
  // recording compiles nothing.
  pipes_.warm(key, 5);

  auto it = recordings_.find(prog.id);
  if (it == recordings_.end() || it->second.entry != entry_) {
    if (it != recordings_.end()) {
      for (auto& f : it->second.frames) t_.wait_for(f.serial);
      free_recording(it->second);
      recordings_.erase(it);
    }
    if (recordings_.size() >= kMaxRecordings) evict_lru();
    Recording rec;
    rec.table_offset = table_space(entries * kFrames);
    rec.table_entries = entries * kFrames;
    rec.entry = entry_;
    it = recordings_.emplace(prog.id, std::move(rec)).first;
  }
  Recording& rec = it->second;
  rec.last_step = ++step_;
  if (rec.key != key) {
    for (auto& f : rec.frames) f.recorded = f.named = false;
    rec.key = key;
  }
  uint32_t fi = rec.next;
  Frame& fr = rec.frames[fi];
  rec.next = (rec.next + 1) % kFrames;
  fr.op_base = uint32_t(rec.table_offset + fi * entries);
  // Before waiting for this frame's last run, submit the Program waiting in
  // the batch, so the device works on it meanwhile.
  if (fr.serial > t_.done_serial() && t_.has_program()) t_.flush();
  t_.wait_for(fr.serial);  // its table entries, sets and command buffer are free again
  for (size_t j = 0, m = 0; j < n; ++j) {
    char* at = table_.mapped + (fr.op_base + entry_[j]) * op_stride_;
    std::memcpy(at, &ops_[j], sizeof(OpParams));
    if (kernel_has(launches_[j].ins->kernel, kMultiTensor))
      std::memcpy(at + sizeof(OpParams), &multi_[kMaxMultiTensors * m++],
                  launches_[j].count * sizeof(MultiEntry));
  }
  // The table is only written by the host, so flushing whole atoms around
  // these entries writes back nothing stale.
  alloc_.flush(table_, fr.op_base * op_stride_, entries * op_stride_);
  if (fr.sets.size() != n) allocate_sets(fr, n);
  // Without update-after-bind, writing a set invalidates the recording.
  if (write_sets(fr, n) && !c_.uab) fr.recorded = false;
  // While profiling, each run is recorded anew with its own queries. The
  // queries are tagged with the next serial, so the Program waiting in the
  // batch goes first (enqueue_program would submit it anyway), and this one
  // runs as that serial.
  const bool prof = prof_.on();
  if (prof && t_.has_program()) t_.flush();
  const size_t instrs = prog.instrs.size();
  int64_t query = prof ? prof_.reserve(uint32_t(instrs + 1)) : -1;
  if (query >= 0 || fr.profiled) fr.recorded = false;
  if (!fr.recorded) record(fr, instrs, key, query);
  fr.serial = t_.enqueue_program(fr.cb);
  if (query >= 0) {
    QueryTiming r;
    r.first = uint32_t(query), r.count = uint32_t(instrs + 1);
    r.kernels.reserve(instrs);
    for (const Instr& ins : prog.instrs) r.kernels.push_back(ins.kernel);
    t_.add_timing(std::move(r));
  }
  for (const Binding& b : bind)
    if (b.buffer) static_cast<Alloc*>(b.buffer.handle)->last_use = fr.serial;
  if (scratch_) scratch_->last_use = fr.serial;
}

void Recorder::allocate_scratch() {
  std::string why;
  scratch_ = alloc_.try_allocate(c_.lc.scratch_bytes, false, why);
  if (!scratch_) {  // queued work's frees land in their blocks first
    t_.wait_idle();
    scratch_ = alloc_.try_allocate(c_.lc.scratch_bytes, false, why);
  }
  if (!scratch_)
    throw OutOfMemory(cat("[execute] out of device memory on ", c_.name(), ": expected ",
                          mib(c_.lc.scratch_bytes),
                          " of scratch for split reductions to fit, found ", why));
}

void Recorder::create() {
  status_ = alloc_.host_buffer(256, MemRole::status);
  std::memset(status_.mapped, 0, 256);
  alloc_.flush(status_, 0, 256);
  // Table entries sit at uniform-buffer offset alignment.
  uint64_t ua = std::max<uint64_t>(c_.p.props.limits.minUniformBufferOffsetAlignment, 16);
  op_stride_ = (sizeof(OpParams) + ua - 1) / ua * ua;
  table_ = alloc_.host_buffer(1 << 20, MemRole::table);
  table_ranges_ = RangeAllocator(table_.size / op_stride_);
}

void Recorder::drop_all() {
  for (auto& [id, rec] : recordings_) free_recording(rec);
  recordings_.clear();
}

void Recorder::check_status() {
  if (!status_.mapped) return;
  // The status word is read and reset only when nothing that might set it
  // is in flight, with plain loads and stores (host atomics on mapped memory
  // do not order with the device's, and may not work at all on uncached
  // memory): the fence wait made the device's write available, and the
  // invalidate makes it visible on non-coherent memory.
  if (!t_.idle()) return;
  alloc_.invalidate(status_, 0, sizeof(uint32_t));
  uint32_t bits = 0;
  std::memcpy(&bits, status_.mapped, sizeof bits);
  if (bits != 0) {
    const uint32_t zero = 0;
    std::memcpy(status_.mapped, &zero, sizeof zero);
    alloc_.flush(status_, 0, sizeof(uint32_t));
    if (bits & 1u)
      c_.pending_error =
          cat("[cross_entropy] expected labels in [0, classes), found a label outside that "
              "range on ",
              c_.name(), " (the loss and its gradient are NaN)");
    else if (bits & 2u)
      c_.pending_error =
          cat("[embedding] expected indices in [0, num_embeddings), found an index outside that "
              "range on ",
              c_.name(), " (its rows are NaN)");
  }
}

void Recorder::destroy() {
  drop_all();
  if (scratch_) alloc_.release(scratch_, UINT64_MAX);  // the device is idle
  scratch_ = nullptr;
  alloc_.free(table_);
  alloc_.free(status_);
  for (const Pool& p : desc_pools_) vk.vkDestroyDescriptorPool(c_.dev, p.pool, nullptr);
  desc_pools_.clear();
  pool_sets_ = 0;
}

}  // namespace switchyard::vk_impl
