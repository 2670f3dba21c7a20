// SPDX-License-Identifier: MIT
// The Vulkan timeline: submissions, their serials and their completion.
//
// Work is submitted in batches: the command buffers recorded since the last
// vkQueueSubmit (transfers, at most one Program, the transfers after it) go
// in one submission when the host must wait for them, or when the next
// Program comes. So a training step (upload the batch, run the step, read
// the loss back) is one vkQueueSubmit, and the device never lags the host by
// more than one Program. Each submission has a serial (1, 2, ...) and a
// fence; a resource records the serial of its last use, and waiting for a
// resource is waiting for that serial.
//
// When submissions complete (retire), the other parts are told through
// hooks: per completed submission (the profiler reads its timestamps), then
// once with the newest completed serial (the transfers' host copies and
// staging ring, the allocator's deferred frees, the status word).
#pragma once
#include <deque>
#include <functional>
#include <vector>

#include "timing.h"
#include "vk_context.h"

namespace switchyard::vk_impl {

// A timing record whose timestamps are the queries [first, first + count).
struct QueryTiming : TimingRecord {
  uint32_t first = 0, count = 0;
};

struct InFlight {
  uint64_t serial;
  VkFence fence;
  std::vector<VkCommandBuffer> transfer_cbs;  // recycled when it completes
  std::vector<QueryTiming> timings;           // read back when it completes
  int64_t submit_ns = 0;                      // profiler clock at vkQueueSubmit
};

class Timeline {
 public:
  explicit Timeline(Context& c) : c_(c) {}

  void on_complete(std::function<void(InFlight&)> f) { on_complete_ = std::move(f); }
  void on_retire(std::function<void(uint64_t done)> f) { on_retire_.push_back(std::move(f)); }

  // The serial the work being collected will run as, and the newest completed one.
  uint64_t next_serial() const { return next_serial_; }
  uint64_t done_serial() const { return done_serial_; }
  // Nothing submitted, collected or being recorded.
  bool idle() const { return inflight_.empty() && batch_.empty() && !open_cb_; }
  bool has_program() const { return batch_has_program_; }

  // The command buffer collecting transfers until the next submission, and
  // the ranges it touched since its last barrier.
  VkCommandBuffer transfer_cb();
  Hazards& transfer_hazards() { return open_hazards_; }
  // Timestamps the work being collected writes.
  void add_timing(QueryTiming t) { batch_timings_.push_back(std::move(t)); }

  // Submits the batch; returns its serial.
  uint64_t flush();
  // Adds a recorded Program to the batch; returns the serial it will run as.
  uint64_t enqueue_program(VkCommandBuffer cb);
  // Completes finished submissions (waiting for all up to `upto`, or all
  // when `all`) and runs the hooks.
  void retire(bool all, uint64_t upto = 0);
  void wait_for(uint64_t serial);
  void wait_idle();
  // Teardown of a device taken for hung: waits up to `ms` for everything
  // submitted (no throw); false if it is still running.
  bool settle(uint64_t ms);
  // At teardown, after vkDeviceWaitIdle: fences and command buffers go.
  void destroy();

  // Every command buffer starts after all earlier work's writes are visible
  // and ends making its writes visible to the host.
  void begin_cb(VkCommandBuffer cb);
  void end_cb(VkCommandBuffer cb);
  static void barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags src_access,
                      VkPipelineStageFlags dst, VkAccessFlags dst_access);

 private:
  VkFence get_fence();
  VkCommandBuffer get_cb();
  void close_transfer();

  Context& c_;
  std::function<void(InFlight&)> on_complete_;
  std::vector<std::function<void(uint64_t)>> on_retire_;
  uint64_t next_serial_ = 1, done_serial_ = 0;
  std::deque<InFlight> inflight_;
  std::vector<VkFence> free_fences_;
  std::vector<VkCommandBuffer> free_cbs_;
  VkCommandBuffer open_cb_ = VK_NULL_HANDLE;
  Hazards open_hazards_;
  std::vector<VkCommandBuffer> batch_, batch_transfer_;
  std::vector<QueryTiming> batch_timings_;
  bool batch_has_program_ = false;
};

}  // namespace switchyard::vk_impl
