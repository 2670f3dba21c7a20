// SPDX-License-Identifier: MIT
// A caching allocator over a raw device allocator (cudaMalloc/cudaFree in the
// CUDA backend; tests drive it with malloc). As PyTorch's: freed blocks are
// kept and reused, so a training loop stops calling cudaMalloc (which is slow
// and synchronizes) after its first step.
//
// - Sizes are rounded up to 512 bytes. Requests up to 1 MiB come from 2 MiB
//   segments (the small pool); larger ones from segments of their own size
//   rounded up to 2 MiB (the large pool). Pools never lend to each other.
// - A request takes the best-fitting free block of its pool (the smallest
//   that fits, lowest address first); what is left over is split off when it
//   is at least 512 bytes (small pool) or 1 MiB (large pool).
// - free() merges a block with its free neighbours in the same segment.
// - When the raw allocator fails, release_cached() gives every wholly free
//   segment back and the request is tried once more; then it fails (nullptr).
//
// Reuse is immediate: every block's users are on one in-order stream, so a
// block freed now is only written by work enqueued later (the device contract
// in device.h). Not thread-safe; the device's lock covers it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

namespace switchyard::cuda_impl {

struct AllocatorStats {
  uint64_t requests = 0;         // allocate() calls that succeeded
  uint64_t cache_hits = 0;       // served from a cached block, no raw allocation
  uint64_t raw_allocations = 0;  // segments obtained from the raw allocator
  uint64_t raw_frees = 0;        // segments given back
  uint64_t segments = 0;         // segments held now
  uint64_t reserved_bytes = 0;   // bytes held in segments
  uint64_t allocated_bytes = 0;  // bytes in blocks handed out (rounded sizes)
  uint64_t peak_reserved_bytes = 0;
};

class CachingAllocator {
 public:
  using RawAlloc = std::function<void*(size_t)>;  // nullptr when out of memory
  using RawFree = std::function<void(void*)>;

  static constexpr size_t kRound = 512;
  static constexpr size_t kSmallLimit = size_t(1) << 20;
  static constexpr size_t kSegmentGranule = size_t(2) << 20;

  CachingAllocator(RawAlloc raw_alloc, RawFree raw_free)
      : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}
  ~CachingAllocator() { release_all(); }
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes`, or nullptr when the raw allocator cannot
  // provide one even after the cache was given back.
  void* allocate(size_t bytes);
  // Returns a block from allocate() to the cache. Unknown pointers throw.
  void free(void* p);
  // Gives every segment with no block in use back; returns the bytes freed.
  size_t release_cached();
  // Gives everything back, in use or not (shutdown).
  void release_all();
  // Size of the block at p as handed out (rounded), or 0 if unknown.
  size_t block_size(const void* p) const;
  const AllocatorStats& stats() const { return stats_; }

 private:
  struct Block {
    char* ptr;
    size_t size;
    bool free;
    bool small;
    Block* prev;  // neighbours within the segment
    Block* next;
    char* segment;
  };
  using FreeSet = std::set<std::pair<size_t, char*>>;  // (size, address)

  FreeSet& pool(bool small) { return small ? free_small_ : free_large_; }
  Block* take(Block* b, size_t size);

  RawAlloc raw_alloc_;
  RawFree raw_free_;
  FreeSet free_small_, free_large_;
  std::unordered_map<char*, Block*> blocks_;  // every block, by address
  std::map<char*, size_t> segments_;          // segment base -> size
  AllocatorStats stats_;
};

}  // namespace switchyard::cuda_impl
