// SPDX-License-Identifier: MIT
// Bookkeeping the GPU backends share for memory the device reads or writes
// asynchronously: a ring whose regions are in use until the submission that
// uses them completes (Vulkan's and CUDA's staging rings, Vulkan's timestamp
// queries), and host copies that must wait for a submission (a staged
// download into the caller's memory). Submissions are numbered by serials
// that grow; "done" is the newest serial known complete. No device calls:
// waiting is the caller's.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>

namespace switchyard {

class SerialRing {
 public:
  explicit SerialRing(uint64_t capacity = 0) : cap_(capacity) {}

  uint64_t capacity() const { return cap_; }
  // Where `n` units go next (at the head, or at 0 when they do not fit
  // before the end) and the newest serial of the regions in use there: 0
  // when they are free now, else the caller waits for that serial, calls
  // retire_through and asks again.
  struct Slot {
    uint64_t begin, wait;
  };
  Slot probe(uint64_t n) const {
    uint64_t begin = head_ + n > cap_ ? 0 : head_;
    uint64_t wait = 0;
    for (const Region& r : used_)
      if (r.begin < begin + n && begin < r.end) wait = std::max(wait, r.serial);
    return {begin, wait};
  }
  // Marks [begin, begin + n) used by the submission `serial`.
  void take(uint64_t begin, uint64_t n, uint64_t serial) {
    head_ = begin + n;
    used_.push_back({begin, begin + n, serial});
  }
  // Frees the regions of submissions up to `done`.
  void retire_through(uint64_t done) {
    std::erase_if(used_, [&](const Region& r) { return r.serial <= done; });
  }
  size_t regions() const { return used_.size(); }
  // The serial of the i-th oldest region in use (for callers that bound the list).
  uint64_t serial_of(size_t i) const { return used_[i].serial; }
  void clear() {
    used_.clear();
    head_ = 0;
  }

 private:
  struct Region {
    uint64_t begin, end, serial;
  };
  uint64_t cap_ = 0, head_ = 0;
  std::deque<Region> used_;
};

// Host copies out of device-written host memory, performed once the
// submission that writes the source completes.
class DeferredCopies {
 public:
  void push(uint64_t serial, const void* src, void* dst, size_t bytes) {
    q_.push_back({serial, static_cast<const char*>(src), dst, bytes});
  }
  void run_through(uint64_t done) {
    run_through(done, [](const char*, size_t) {});
  }
  // `before(src, bytes)` runs before each copy (an invalidate of
  // non-coherent memory).
  template <class Before>
  void run_through(uint64_t done, Before before) {
    while (!q_.empty() && q_.front().serial <= done) {
      before(q_.front().src, q_.front().bytes);
      std::memcpy(q_.front().dst, q_.front().src, q_.front().bytes);
      q_.pop_front();
    }
  }
  // Drops copies nobody waited for (at teardown: their targets may be gone).
  void clear() { q_.clear(); }
  bool empty() const { return q_.empty(); }

 private:
  struct Copy {
    uint64_t serial;
    const char* src;
    void* dst;
    size_t bytes;
  };
  std::deque<Copy> q_;
};

}  // namespace switchyard
