// SPDX-License-Identifier: MIT
// A first-fit range allocator with coalescing: suballocates tensors inside
// large device-memory blocks (one vkAllocateMemory per block, not per tensor).
#pragma once
#include <cstdint>
#include <map>
#include <optional>

#include "vk_loader.h"

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

// A device-memory block: one VkBuffer over one allocation, suballocated.
struct Block {
  VkDeviceMemory mem = VK_NULL_HANDLE;
  VkBuffer buf = VK_NULL_HANDLE;
  uint64_t size = 0;
  char* mapped = nullptr;
  RangeAllocator ranges;
  bool dedicated = false;
  bool host = false;  // pinned host memory (allocate_host), always mapped
  uint32_t heap = 0;
  uint64_t bytes = 0;  // of device memory
  // The memory type's nature (the simulated type's under
  // SWITCHYARD_VK_SIMULATE); `real` as in HostBuf.
  bool coherent = true, cached = true;
  char* real = nullptr;
};

// A suballocation: what a Buffer's handle points at.
struct Alloc {
  uint32_t block = 0;
  uint64_t offset = 0, size = 0;
  uint64_t last_use = 0;  // serial of the last submission that touches it
};

}  // namespace switchyard::vk_impl
