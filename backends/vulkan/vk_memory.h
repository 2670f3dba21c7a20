// A first-fit range allocator with coalescing: suballocates tensors inside
// large device-memory blocks (one vkAllocateMemory per block, not per tensor).
#pragma once
#include <cstdint>
#include <map>
#include <optional>

namespace switchyard::vk_impl {

class RangeAllocator {
 public:
  RangeAllocator() = default;
  explicit RangeAllocator(uint64_t size) : size_(size) { free_[0] = size; }
  // Offset of `bytes` aligned to `align` (a power of two), or nothing.
  std::optional<uint64_t> allocate(uint64_t bytes, uint64_t align);
  void free(uint64_t offset, uint64_t bytes);
  uint64_t size() const { return size_; }
  uint64_t used() const { return used_; }
  bool empty() const { return used_ == 0; }

 private:
  uint64_t size_ = 0, used_ = 0;
  std::map<uint64_t, uint64_t> free_;  // offset -> length, never adjacent
};

}  // namespace switchyard::vk_impl
