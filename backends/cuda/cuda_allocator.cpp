// SPDX-License-Identifier: MIT
// The caching allocator (see cuda_allocator.h for the policy).
#include "cuda_allocator.h"

#include "switchyard/error.h"

namespace switchyard::cuda_impl {

// Marks b used with `size` bytes, splitting the rest off as a free block when
// it is big enough to be worth keeping apart.
CachingAllocator::Block* CachingAllocator::take(Block* b, size_t size) {
  pool(b->small).erase({b->size, b->ptr});
  size_t rest = b->size - size;
  if (rest >= (b->small ? kRound : kSmallLimit)) {
    auto* r = new Block{b->ptr + size, rest, true, b->small, b, b->next, b->segment};
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    blocks_[r->ptr] = r;
    pool(r->small).insert({r->size, r->ptr});
  }
  b->free = false;
  stats_.allocated_bytes += b->size;
  return b;
}

void* CachingAllocator::allocate(size_t bytes) {
  size_t size = (bytes + kRound - 1) / kRound * kRound;
  if (size == 0) size = kRound;
  bool small = size <= kSmallLimit;
  FreeSet& fs = pool(small);
  if (auto it = fs.lower_bound({size, nullptr}); it != fs.end()) {
    Block* b = take(blocks_.at(it->second), size);
    ++stats_.requests;
    ++stats_.cache_hits;
    return b->ptr;
  }
  size_t seg =
      small ? kSegmentGranule : (size + kSegmentGranule - 1) / kSegmentGranule * kSegmentGranule;
  void* raw = raw_alloc_(seg);
  if (!raw && release_cached() > 0) raw = raw_alloc_(seg);
  if (!raw) return nullptr;
  char* base = static_cast<char*>(raw);
  segments_[base] = seg;
  ++stats_.raw_allocations;
  ++stats_.segments;
  stats_.reserved_bytes += seg;
  if (stats_.reserved_bytes > stats_.peak_reserved_bytes)
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
  auto* b = new Block{base, seg, true, small, nullptr, nullptr, base};
  blocks_[base] = b;
  fs.insert({seg, base});
  ++stats_.requests;
  return take(b, size)->ptr;
}

void CachingAllocator::free(void* p) {
  auto it = blocks_.find(static_cast<char*>(p));
  SY_CHECK(it != blocks_.end() && !it->second->free, "release",
           "expected a block allocated on this device, found an unknown or already freed pointer ",
           p);
  Block* b = it->second;
  stats_.allocated_bytes -= b->size;
  b->free = true;
  FreeSet& fs = pool(b->small);
  auto absorb = [&](Block* keep, Block* gone) {  // gone follows keep
    fs.erase({gone->size, gone->ptr});
    keep->size += gone->size;
    keep->next = gone->next;
    if (gone->next) gone->next->prev = keep;
    blocks_.erase(gone->ptr);
    delete gone;
  };
  if (b->next && b->next->free) absorb(b, b->next);
  if (b->prev && b->prev->free) {
    Block* p0 = b->prev;
    fs.erase({p0->size, p0->ptr});
    absorb(p0, b);
    b = p0;
  }
  fs.insert({b->size, b->ptr});
}

size_t CachingAllocator::release_cached() {
  size_t freed = 0;
  for (auto it = segments_.begin(); it != segments_.end();) {
    Block* b = blocks_.at(it->first);
    if (b->free && !b->next && b->size == it->second) {  // one free block spans the segment
      pool(b->small).erase({b->size, b->ptr});
      blocks_.erase(b->ptr);
      delete b;
      raw_free_(it->first);
      freed += it->second;
      stats_.reserved_bytes -= it->second;
      --stats_.segments;
      ++stats_.raw_frees;
      it = segments_.erase(it);
    } else {
      ++it;
    }
  }
  return freed;
}

void CachingAllocator::release_all() {
  for (auto& [p, b] : blocks_) delete b;
  blocks_.clear();
  free_small_.clear();
  free_large_.clear();
  for (auto& [base, size] : segments_) {
    raw_free_(base);
    ++stats_.raw_frees;
  }
  segments_.clear();
  stats_.segments = stats_.reserved_bytes = stats_.allocated_bytes = 0;
}

size_t CachingAllocator::block_size(const void* p) const {
  auto it = blocks_.find(static_cast<char*>(const_cast<void*>(p)));
  return it == blocks_.end() || it->second->free ? 0 : it->second->size;
}

}  // namespace switchyard::cuda_impl
