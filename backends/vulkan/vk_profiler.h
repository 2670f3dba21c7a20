// SPDX-License-Identifier: MIT
// The Vulkan profiler hooks: while the profiler is on, every copy and every
// launch writes timestamps into a ring of queries; they are read back when
// their submission completes and become the profiler's transfer and kernel
// events (backends/common/timing.h).
#pragma once
#include <cstdint>

#include "serial_ring.h"
#include "vk_timeline.h"

namespace switchyard::vk_impl {

constexpr uint32_t kQueries = 8192;  // timestamp queries while profiling

class Profiler {
 public:
  Profiler(Context& c, Timeline& t);

  // The profiler is on and the queue writes timestamps.
  bool on() const { return ts_ok_ && profile::enabled(); }
  // First of n consecutive free queries, waiting for a submitted batch that
  // used them if needed. -1 (this work goes unmeasured) if n exceeds the
  // pool or the queries are the current batch's: waiting for those would
  // submit the batch under a caller that is still adding to it.
  int64_t reserve(uint32_t n);
  VkQueryPool pool() const { return pool_; }
  // Turns a completed submission's timestamps into profiler events. The
  // device clock is placed on the host's: a submission's first timestamp no
  // earlier than its vkQueueSubmit, its last no later than now.
  void harvest(InFlight& f);
  // A host-side transfer (zero-copy memcpy): timed on the host's clock.
  void host_transfer(const char* kind, size_t bytes, int64_t t0) const;
  void destroy();

 private:
  Context& c_;
  Timeline& t_;
  bool ts_ok_ = false;        // the queue writes timestamps
  double ts_period_ = 1.0;    // ns per tick
  uint64_t ts_mask_ = ~0ull;  // timestampValidBits
  VkQueryPool pool_ = VK_NULL_HANDLE;
  SerialRing queries_{kQueries};
  bool anchored_ = false;
  int64_t offset_ = 0;  // device ns -> profiler ns
};

}  // namespace switchyard::vk_impl
