// SPDX-License-Identifier: MIT
// What a GPU backend measured of one submission while the profiler is on,
// and how it becomes profiler events. Each backend takes its own timestamps
// (Vulkan timestamp queries, CUDA events) and places them on the profiler's
// clock; the events are made here, the same way for both.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "switchyard/backend/kernels.h"
#include "switchyard/profile.h"

namespace switchyard {

// A Program (one timestamp before its first launch and one after each) or a
// copy (before and after).
struct TimingRecord {
  std::vector<Kernel> kernels;  // a Program's launches; empty for a copy
  const char* name = nullptr;   // a copy's transfer kind
  uint64_t bytes = 0;           // a copy's size
  size_t points() const { return kernels.empty() ? 2 : kernels.size() + 1; }
};

// One profiler event per interval between consecutive points (profiler
// clock, ns): kernel events for a Program, a transfer event for a copy.
inline void record_timing(const std::string& device, const TimingRecord& r,
                          std::span<const int64_t> t) {
  for (size_t j = 0; j + 1 < t.size(); ++j) {
    profile::Event e;
    e.track = r.kernels.empty() ? profile::Track::transfer : profile::Track::kernel;
    e.device = device;
    e.name = r.kernels.empty() ? r.name : kernel_name(r.kernels[j]);
    e.start_ns = t[j];
    e.dur_ns = std::max<int64_t>(0, t[j + 1] - t[j]);
    e.bytes = r.bytes;
    e.device_clock = true;
    profile::record(std::move(e));
  }
}

}  // namespace switchyard
