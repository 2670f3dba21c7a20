// SPDX-License-Identifier: MIT
// The Vulkan allocator: blocks, suballocation, deferred frees, budget
// checks, host-visible helper buffers (see vk_allocator.h).
#include "vk_allocator.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "units.h"

namespace switchyard::vk_impl {

namespace {

// The atom-aligned range of a mapping that covers [off, off + n): whole
// atoms, clipped to the allocation.
std::pair<uint64_t, uint64_t> atoms(uint64_t atom, uint64_t bytes, uint64_t off, uint64_t n) {
  atom = std::max<uint64_t>(atom, 1);
  uint64_t begin = off / atom * atom;
  uint64_t end = std::min<uint64_t>((off + n + atom - 1) / atom * atom, bytes);
  return {begin, end};
}

}  // namespace

void Allocator::sync_range(VkDeviceMemory mem, char* mapped, char* real, uint64_t bytes,
                           uint64_t off, uint64_t n, bool to_device) {
  if (n == 0) return;
  auto [begin, end] = atoms(c_.p.props.limits.nonCoherentAtomSize, bytes, off, n);
  // The emulation: the shadow reaches the device's memory only here, and
  // the device's writes reach the shadow only here, whole atoms at a time.
  if (real) {
    if (to_device)
      std::memcpy(real + begin, mapped + begin, end - begin);
    else
      std::memcpy(mapped + begin, real + begin, end - begin);
  }
  VkMappedMemoryRange r{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  r.memory = mem;
  r.offset = begin;
  r.size = end == bytes ? VK_WHOLE_SIZE : end - begin;
  VkResult res = to_device ? vk.vkFlushMappedMemoryRanges(c_.dev, 1, &r)
                           : vk.vkInvalidateMappedMemoryRanges(c_.dev, 1, &r);
  c_.check(res, to_device ? "flush" : "invalidate",
           to_device ? "vkFlushMappedMemoryRanges" : "vkInvalidateMappedMemoryRanges");
  bump(to_device ? c_.counters.memory_flushes : c_.counters.memory_invalidates);
}

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
    if (b.real) delete[] b.mapped;
    b.mapped = b.real = nullptr;
    if (b.mem) vk.vkFreeMemory(c_.dev, b.mem, nullptr);
    vk.vkDestroyBuffer(c_.dev, b.buf, nullptr);
    b.buf = VK_NULL_HANDLE, b.mem = VK_NULL_HANDLE;
    why = std::move(w);
    return false;
  };
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(c_.dev, b.buf, &req);
  // The types the buffer may use, as the device's (or the simulated
  // device's) type indices.
  uint32_t allowed = 0;
  for (uint32_t t = 0; t < c_.p.mem.memoryTypeCount; ++t)
    if (req.memoryTypeBits & (1u << c_.p.real_type[t])) allowed |= 1u << t;
  int t = type(allowed);
  if (t < 0) return fail("no suitable memory type");
  const VkMemoryPropertyFlags flags = c_.p.mem.memoryTypes[t].propertyFlags;
  b.heap = c_.p.mem.memoryTypes[t].heapIndex;
  b.coherent = flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  b.cached = flags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  if (budget && !within_budget(b.heap, req.size))
    return fail(cat("heap ", b.heap, " has a budget of ", mib(budget_[b.heap]), " and ",
                    mib(heap_used_[b.heap]), " are in use"));
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = c_.p.real_type[t];
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
    if (c_.p.emulate_noncoherent & (1u << t)) {  // the host gets a shadow
      b.real = b.mapped;
      b.mapped = new (std::nothrow) char[req.size];
      if (!b.mapped) {
        b.real = nullptr;
        return fail(cat("no host memory for a ", mib(req.size), " shadow"));
      }
      std::memcpy(b.mapped, b.real, req.size);
    }
  }
  b.size = size;
  b.bytes = req.size;
  if (budget) heap_used_[b.heap] += req.size;
  return true;
}

bool Allocator::within_budget(uint32_t heap, uint64_t bytes) {
  // Read at every new block (a cheap query): other processes' use changes.
  query_budget(c_.p, heap_used_, budget_);
  return heap_used_[heap] + bytes <= budget_[heap];
}

HostBuf Allocator::host_buffer(uint64_t size, MemRole role) {
  Block b;
  std::string why;
  auto type = [&](uint32_t allowed) { return pick_memory(c_.p, c_.mem.zero_copy, role, allowed); };
  if (!create_memory(size, type, true, false, b, why))
    throw OutOfMemory(
        cat("[allocate] host-visible buffer of ", mib(size), " on ", c_.name(), ": ", why));
  const char* what = role == MemRole::staging  ? "staging ring"
                     : role == MemRole::table  ? "launch table"
                     : role == MemRole::status ? "status word"
                                               : "host buffer";
  c_.set_name(VK_OBJECT_TYPE_BUFFER, b.buf, what);
  c_.set_name(VK_OBJECT_TYPE_DEVICE_MEMORY, b.mem, what);
  return {b.mem, b.buf, size, b.mapped, b.real, b.bytes, b.coherent, b.cached};
}

void Allocator::free(HostBuf& h) {
  if (h.real) delete[] h.mapped;
  if (h.buf) vk.vkDestroyBuffer(c_.dev, h.buf, nullptr);
  if (h.mem) vk.vkFreeMemory(c_.dev, h.mem, nullptr);
  h = HostBuf{};
}

uint64_t Allocator::block_cap() const {
  uint64_t cap = 1ull << 30;
  if (c_.p.maint3.maxMemoryAllocationSize)
    cap = std::min<uint64_t>(cap, c_.p.maint3.maxMemoryAllocationSize);
  return cap & ~(kAlign - 1);
}

bool Allocator::create_block(uint32_t k, uint64_t size, bool dedicated, bool host, MemRole role,
                             std::string& why) {
  Block b;
  b.dedicated = dedicated;
  b.host = host;
  const int tensor_heap =
      c_.mem.tensor >= 0 ? int(c_.p.mem.memoryTypes[c_.mem.tensor].heapIndex) : -1;
  auto type = [&](uint32_t allowed) {
    return pick_memory(c_.p, c_.mem.zero_copy, role, allowed, tensor_heap);
  };
  if (!create_memory(size, type, c_.mem.zero_copy || host, true, b, why)) return false;
  if (role == MemRole::tensor_fallback) bump(c_.counters.fallback_blocks);
  const std::string what = cat(host ? "pinned block " : "tensor block ", k, " (",
                               dedicated ? "dedicated, " : "", mib(size), ")");
  c_.set_name(VK_OBJECT_TYPE_BUFFER, b.buf, what);
  c_.set_name(VK_OBJECT_TYPE_DEVICE_MEMORY, b.mem, what);
  b.ranges = RangeAllocator(size);
  if (!host) bump(c_.counters.bytes_reserved, b.bytes);
  blocks_[k] = std::move(b);
  return true;
}

void Allocator::destroy_block(uint32_t k) {
  Block& b = blocks_[k];
  if (b.real) delete[] b.mapped;
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
  // allocation itself. Tensors then go to the fallback heap, if any (an
  // APU's system memory past its device-local carve-out).
  const uint64_t least = (bytes + (1ull << 16) - 1) & ~((1ull << 16) - 1);
  const MemRole roles[2] = {host ? MemRole::pinned : MemRole::tensor, MemRole::tensor_fallback};
  const int passes = !host && c_.mem.tensor_fallback >= 0 ? 2 : 1;
  bool made = false;
  std::string first_why;
  for (int pass = 0; pass < passes && !made; ++pass) {
    for (uint64_t s = size;;) {
      if (create_block(uint32_t(slot), s, dedicated, host, roles[pass], why)) {
        made = true;
        size = s;
        break;
      }
      if (dedicated || s <= least) break;
      s = std::max(least, s / 2);
    }
    if (pass == 0) first_why = why;
  }
  if (!made) {
    if (passes == 2) why = cat(first_why, "; the fallback heap: ", why);
    return nullptr;
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
    if (b.real) delete[] b.mapped;
    if (b.buf) vk.vkDestroyBuffer(c_.dev, b.buf, nullptr);
    if (b.mem) vk.vkFreeMemory(c_.dev, b.mem, nullptr);
  }
  blocks_.clear();
  std::fill(std::begin(heap_used_), std::end(heap_used_), 0);
  dead_dedicated_ = false;
}

}  // namespace switchyard::vk_impl
