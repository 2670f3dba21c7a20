// VulkanDevice's profiler hooks: timestamp queries around launches and
// copies, read back when their submission completes.
#include "vk_device.h"

namespace switchyard::vk_impl {

int64_t VulkanDevice::query_reserve(uint32_t n) {
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

void VulkanDevice::harvest(InFlight& f) {
  if (f.prof.empty()) return;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  std::vector<std::vector<int64_t>> ns(f.prof.size());
  for (size_t k = 0; k < f.prof.size(); ++k) {
    const ProfRec& r = f.prof[k];
    std::vector<uint64_t> ticks(r.count);
    VkResult res =
        vk.vkGetQueryPoolResults(dev_, qpool_, r.first, r.count, r.count * 8, ticks.data(), 8,
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
  if (!ts_anchored_ || lo + ts_offset_ < f.submit_ns)
    ts_offset_ = f.submit_ns - lo, ts_anchored_ = true;
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

void VulkanDevice::host_transfer(const char* kind, size_t bytes, int64_t t0) {
  profile::record_since(profile::Track::transfer, *this, kind, t0, bytes);
}

}  // namespace switchyard::vk_impl
