// SPDX-License-Identifier: MIT
#include "vk_memory.h"

namespace switchyard::vk_impl {

std::optional<uint64_t> RangeAllocator::allocate(uint64_t bytes, uint64_t align) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    uint64_t start = (it->first + align - 1) & ~(align - 1);
    uint64_t end = it->first + it->second;
    if (start + bytes > end) continue;
    uint64_t off = it->first;
    free_.erase(it);
    if (start > off) free_[off] = start - off;  // keep the alignment gap
    if (start + bytes < end) free_[start + bytes] = end - (start + bytes);
    used_ += bytes;
    return start;
  }
  return std::nullopt;
}

void RangeAllocator::free(uint64_t offset, uint64_t bytes) {
  used_ -= bytes;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return;
    }
  }
  free_[offset] = bytes;
}

}  // namespace switchyard::vk_impl
