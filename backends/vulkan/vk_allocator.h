// SPDX-License-Identifier: MIT
// The Vulkan allocator: device memory for tensors and host-visible helper
// buffers. Tensors are suballocated from a few large blocks (one VkBuffer
// and one vkAllocateMemory each; first-fit ranges in vk_memory.h), grown
// 64 MiB (pinned host blocks: 16 MiB), then twice the last, up to the block
// cap (1 GiB, or less where maxMemoryAllocationSize says so); a tensor over
// half the cap gets a dedicated block. Memory types follow the device's
// memory policy (vk_memory_policy.h): tensors' type, mapped in the
// zero-copy mode, then a fallback heap's once the first is over its budget;
// pinned host blocks are host-visible, coherent and preferably cached. Each
// heap has a budget (VK_EXT_memory_budget's, else its size), so running out
// is an OutOfMemory naming the heap, not a driver failure later. A tensor released while queued
// work still uses it is freed when that work completes (retire_through).
#pragma once
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vk_context.h"
#include "vk_memory.h"

namespace switchyard::vk_impl {

constexpr uint64_t kAlign = 256;  // suballocation alignment
constexpr uint64_t kFirstBlock = 64ull << 20;

class Allocator {
 public:
  explicit Allocator(Context& c) : c_(c) {}

  // A mapped buffer outside the budget, of the memory the policy gives
  // `role` (vk_memory_policy.h). Throws OutOfMemory.
  HostBuf host_buffer(uint64_t size, MemRole role);
  void free(HostBuf& h);

  // Non-coherent memory: makes the host's writes to [off, off + n) visible
  // to the device (flush) or the device's writes visible to the host
  // (invalidate), in whole nonCoherentAtomSize atoms; nothing for coherent
  // memory. An invalidate drops unflushed host writes in those atoms, so a
  // partial write of an atom invalidates it first.
  template <class B>
  void flush(const B& b, uint64_t off, uint64_t n) {
    if (!b.coherent) sync_range(b.mem, b.mapped, b.real, b.bytes, off, n, true);
  }
  template <class B>
  void invalidate(const B& b, uint64_t off, uint64_t n) {
    if (!b.coherent) sync_range(b.mem, b.mapped, b.real, b.bytes, off, n, false);
  }

  // A suballocation of `bytes` (pinned host memory when `host`), or nullptr
  // and `why` when no block has room and the device refuses a new one.
  Alloc* try_allocate(uint64_t bytes, bool host, std::string& why);
  // Frees `a` now if its last use is done, else once retire_through(done)
  // passes it.
  void release(Alloc* a, uint64_t done);
  void retire_through(uint64_t done);

  // Whether trim(all) would free a block: an empty dedicated block (or any
  // empty block when `all`). The caller makes sure nothing queued or
  // recorded still names the blocks before trim().
  bool trimmable(bool all) const;
  void trim(bool all);
  // True once after a dedicated block's tensor was freed.
  bool take_dead_dedicated() { return std::exchange(dead_dedicated_, false); }

  std::span<const Block> blocks() const { return blocks_; }
  const Block& block(const Alloc* a) const { return blocks_[a->block]; }
  char* mapped(const Alloc* a) const {
    char* m = blocks_[a->block].mapped;
    return m ? m + a->offset : nullptr;
  }
  void destroy();

 private:
  template <class PickType>
  bool create_memory(uint64_t size, PickType type, bool map, bool budget, Block& b,
                     std::string& why);
  void sync_range(VkDeviceMemory mem, char* mapped, char* real, uint64_t bytes, uint64_t off,
                  uint64_t n, bool to_device);
  bool within_budget(uint32_t heap, uint64_t bytes);
  uint64_t block_cap() const;  // blocks are bound by range, so may exceed maxStorageBufferRange
  bool create_block(uint32_t k, uint64_t size, bool dedicated, bool host, MemRole role,
                    std::string& why);
  void destroy_block(uint32_t k);
  void free_alloc(Alloc* a);

  Context& c_;
  std::vector<Block> blocks_;
  uint64_t heap_used_[VK_MAX_MEMORY_HEAPS] = {};
  uint64_t budget_[VK_MAX_MEMORY_HEAPS] = {};  // query_budget's, read at each new block
  std::vector<Alloc*> deferred_;               // released while queued work uses them
  bool dead_dedicated_ = false;
};

}  // namespace switchyard::vk_impl
