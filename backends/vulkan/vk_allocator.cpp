// SPDX-License-Identifier: MIT
// The Vulkan allocator: blocks, suballocation, deferred frees, budget
// checks, host-visible helper buffers (see vk_allocator.h).
#include "vk_allocator.h"

#include "units.h"

namespace switchyard::vk_impl {

template <class PickType>
bool Allocator::create_memory(uint64_t size, PickType type, bool map, bool budget, Block& b,
                              std::string& why) {
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
              VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vk.vkCreateBuffer(c_.dev, &bci, nullptr, &b.buf);
  if (r != VK_SUCCESS) {
    why = cat("vkCreateBuffer of ", size, " bytes failed: ", result_name(r));
    b.buf = VK_NULL_HANDLE;
    return false;
  }
  auto fail = [&](std::string w) {
    if (b.mem) vk.vkFreeMemory(c_.dev, b.mem, nullptr);
    vk.vkDestroyBuffer(c_.dev, b.buf, nullptr);
    b.buf = VK_NULL_HANDLE, b.mem = VK_NULL_HANDLE;
    why = std::move(w);
    return false;
  };
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(c_.dev, b.buf, &req);
  int t = type(req.memoryTypeBits);
  if (t < 0) return fail("no suitable memory type");
  b.heap = c_.p.mem.memoryTypes[t].heapIndex;
  uint64_t heap_size = c_.p.mem.memoryHeaps[b.heap].size;
  if (budget && heap_used_[b.heap] + req.size > heap_size)
    return fail(cat("heap ", b.heap, " holds ", mib(heap_size), " and ", mib(heap_used_[b.heap]),
                    " are in use"));
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = uint32_t(t);
  r = vk.vkAllocateMemory(c_.dev, &ai, nullptr, &b.mem);
  if (r != VK_SUCCESS) {
    b.mem = VK_NULL_HANDLE;
    return fail(cat("vkAllocateMemory of ", mib(req.size), " failed: ", result_name(r)));
  }
  bump(c_.counters.memory_allocations);
  r = vk.vkBindBufferMemory(c_.dev, b.buf, b.mem, 0);
  if (r != VK_SUCCESS) return fail(cat("vkBindBufferMemory failed: ", result_name(r)));
  if (map) {
    void* ptr = nullptr;
    r = vk.vkMapMemory(c_.dev, b.mem, 0, VK_WHOLE_SIZE, 0, &ptr);
    if (r != VK_SUCCESS) return fail(cat("vkMapMemory failed: ", result_name(r)));
    b.mapped = static_cast<char*>(ptr);
  }
  b.size = size;
  b.bytes = req.size;
  if (budget) heap_used_[b.heap] += req.size;
  return true;
}

HostBuf Allocator::host_buffer(uint64_t size, bool want_device_local) {
  Block b;
  std::string why;
  auto type = [&](uint32_t bits) {
    return pick_type(c_.p.mem, bits,
                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     want_device_local ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
                                       : VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                     want_device_local ? 0 : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  };
  if (!create_memory(size, type, true, false, b, why))
    throw OutOfMemory(
        cat("[allocate] host-visible buffer of ", mib(size), " on ", c_.name(), ": ", why));
  return {b.mem, b.buf, size, b.mapped};
}

void Allocator::free(HostBuf& h) {
  if (h.buf) vk.vkDestroyBuffer(c_.dev, h.buf, nullptr);
  if (h.mem) vk.vkFreeMemory(c_.dev, h.mem, nullptr);
  h = HostBuf{};
}

int Allocator::block_type(uint32_t bits, bool host) const {
  if (host)  // pinned host memory: system memory the device reaches, cached for reads
    return pick_type(c_.p.mem, bits,
                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (c_.zero_copy)
    return pick_type(c_.p.mem, bits,
                     VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                         VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
  int t = pick_type(c_.p.mem, bits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0,
                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  return t >= 0 ? t : pick_type(c_.p.mem, bits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
}

uint64_t Allocator::block_cap() const {
  uint64_t cap = 1ull << 30;
  if (c_.p.maint3.maxMemoryAllocationSize)
    cap = std::min<uint64_t>(cap, c_.p.maint3.maxMemoryAllocationSize);
  return cap & ~(kAlign - 1);
}

bool Allocator::create_block(uint32_t k, uint64_t size, bool dedicated, bool host,
                             std::string& why) {
  Block b;
  b.dedicated = dedicated;
  b.host = host;
  auto type = [&](uint32_t bits) { return block_type(bits, host); };
  if (!create_memory(size, type, c_.zero_copy || host, true, b, why)) return false;
  b.ranges = RangeAllocator(size);
  if (!host) bump(c_.counters.bytes_reserved, b.bytes);
  blocks_[k] = std::move(b);
  return true;
}

void Allocator::destroy_block(uint32_t k) {
  Block& b = blocks_[k];
  vk.vkDestroyBuffer(c_.dev, b.buf, nullptr);
  vk.vkFreeMemory(c_.dev, b.mem, nullptr);
  heap_used_[b.heap] -= b.bytes;
  if (!b.host) bump(c_.counters.bytes_reserved, uint64_t(0) - b.bytes);
  blocks_[k] = Block{};
}

bool Allocator::trimmable(bool all) const {
  for (auto& b : blocks_)
    if (b.buf && b.ranges.empty() && (all || b.dedicated)) return true;
  return false;
}

void Allocator::trim(bool all) {
  for (uint32_t k = 0; k < blocks_.size(); ++k)
    if (blocks_[k].buf && blocks_[k].ranges.empty() && (all || blocks_[k].dedicated))
      destroy_block(k);
}

Alloc* Allocator::try_allocate(uint64_t bytes, bool host, std::string& why) {
  uint64_t cap = block_cap();
  if (bytes <= cap / 2) {
    for (uint32_t k = 0; k < blocks_.size(); ++k)
      if (blocks_[k].buf && !blocks_[k].dedicated && blocks_[k].host == host)
        if (auto off = blocks_[k].ranges.allocate(bytes, kAlign))
          return new Alloc{k, *off, bytes, 0};
  }
  int slot = -1;
  for (uint32_t k = 0; k < blocks_.size() && slot < 0; ++k)
    if (!blocks_[k].buf) slot = int(k);
  if (slot < 0) {
    slot = int(blocks_.size());
    blocks_.emplace_back();
  }
  bool dedicated = bytes > cap / 2;
  uint64_t size = (bytes + (1ull << 16) - 1) & ~((1ull << 16) - 1);
  if (!dedicated) {
    // Blocks grow: 64 MiB (16 MiB for host memory), then twice the last, up to 1 GiB.
    uint64_t last = 0;
    for (auto& b : blocks_)
      if (b.buf && !b.dedicated && b.host == host) last = std::max(last, b.size);
    size = std::max(size, std::min(cap, last ? 2 * last : host ? kFirstBlock / 4 : kFirstBlock));
  }
  // Near the heap's end a grown block may not fit: halve it, down to the
  // allocation itself.
  uint64_t least = (bytes + (1ull << 16) - 1) & ~((1ull << 16) - 1);
  while (!create_block(uint32_t(slot), size, dedicated, host, why)) {
    if (dedicated || size <= least) return nullptr;
    size = std::max(least, size / 2);
  }
  if (dedicated) {
    blocks_[slot].ranges.allocate(bytes, kAlign);
    return new Alloc{uint32_t(slot), 0, bytes, 0};
  }
  auto off = blocks_[slot].ranges.allocate(bytes, kAlign);
  if (!off) {  // cannot happen: the block was sized for it
    why = cat("a new block of ", size, " bytes has no room for ", bytes);
    return nullptr;
  }
  return new Alloc{uint32_t(slot), *off, bytes, 0};
}

void Allocator::free_alloc(Alloc* a) {
  blocks_[a->block].ranges.free(a->offset, a->size);
  if (blocks_[a->block].dedicated) dead_dedicated_ = true;
  delete a;
}

void Allocator::release(Alloc* a, uint64_t done) {
  if (a->last_use > done)
    deferred_.push_back(a);
  else
    free_alloc(a);
}

void Allocator::retire_through(uint64_t done) {
  std::erase_if(deferred_, [&](Alloc* a) {
    if (a->last_use > done) return false;
    free_alloc(a);
    return true;
  });
}

void Allocator::destroy() {
  for (Alloc* a : deferred_) delete a;
  deferred_.clear();
  for (auto& b : blocks_) {
    if (b.buf) vk.vkDestroyBuffer(c_.dev, b.buf, nullptr);
    if (b.mem) vk.vkFreeMemory(c_.dev, b.mem, nullptr);
  }
  blocks_.clear();
  std::fill(std::begin(heap_used_), std::end(heap_used_), 0);
  dead_dedicated_ = false;
}

}  // namespace switchyard::vk_impl
