// SPDX-License-Identifier: MIT
// The Vulkan profiler hooks: timestamp queries around launches and copies,
// read back when their submission completes (see vk_profiler.h).
#include "vk_profiler.h"

#include <algorithm>

namespace switchyard::vk_impl {

Profiler::Profiler(Context& c, Timeline& t) : c_(c), t_(t) {
  uint32_t bits = c.p.queues[c.p.queue_family].timestampValidBits;
  ts_ok_ = bits > 0 && c.p.props.limits.timestampPeriod > 0;
  ts_period_ = c.p.props.limits.timestampPeriod;
  ts_mask_ = bits >= 64 ? ~0ull : (1ull << bits) - 1;
}

int64_t Profiler::reserve(uint32_t n) {
  if (n > kQueries) return -1;
  if (!pool_) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = kQueries;
    c_.check(vk.vkCreateQueryPool(c_.dev, &qi, nullptr, &pool_), "profile", "vkCreateQueryPool");
    c_.set_name(VK_OBJECT_TYPE_QUERY_POOL, pool_, "timestamp queries");
  }
  for (;;) {
    queries_.retire_through(t_.done_serial());
    auto [begin, wait] = queries_.probe(n);
    if (!wait) {
      queries_.take(begin, n, t_.next_serial());
      return int64_t(begin);
    }
    if (wait >= t_.next_serial()) return -1;
    t_.retire(false, wait);
  }
}

void Profiler::harvest(InFlight& f) {
  if (f.timings.empty()) return;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  std::vector<std::vector<int64_t>> ns(f.timings.size());
  for (size_t k = 0; k < f.timings.size(); ++k) {
    const QueryTiming& r = f.timings[k];
    std::vector<uint64_t> ticks(r.count);
    VkResult res =
        vk.vkGetQueryPoolResults(c_.dev, pool_, r.first, r.count, r.count * 8, ticks.data(), 8,
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
  if (!anchored_ || lo + offset_ < f.submit_ns) offset_ = f.submit_ns - lo, anchored_ = true;
  if (hi + offset_ > now) offset_ = now - hi;
  std::string dev = c_.name();
  for (size_t k = 0; k < f.timings.size(); ++k) {
    std::vector<int64_t>& t = ns[k];
    if (t.size() != f.timings[k].count) continue;
    for (int64_t& v : t) v += offset_;
    record_timing(dev, f.timings[k], t);
  }
}

void Profiler::host_transfer(const char* kind, size_t bytes, int64_t t0) const {
  profile::record_since(profile::Track::transfer, c_.owner, kind, t0, bytes);
}

void Profiler::destroy() {
  if (pool_) vk.vkDestroyQueryPool(c_.dev, pool_, nullptr);
  pool_ = VK_NULL_HANDLE;
  queries_.clear();
  anchored_ = false;
  offset_ = 0;
}

}  // namespace switchyard::vk_impl
