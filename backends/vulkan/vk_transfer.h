// SPDX-License-Identifier: MIT
// The Vulkan transfers: uploads, downloads and copies. Where the memory
// policy maps tensors (CPU drivers, integrated GPUs: vk_memory_policy.h)
// transfers are plain memcpy ("zero-copy"), with flushes and invalidates
// where the memory is not coherent, and downloads from memory the host does
// not cache go through the ring; otherwise (discrete GPUs, or with
// SWITCHYARD_VK_FORCE_STAGING=1) they go through a persistently mapped,
// host-cached staging ring and vkCmdCopyBuffer in 8 MiB chunks (a transfer
// of several chunks submits each one when recorded, so the next memcpy
// overlaps its copy). A staged download lands in the ring; its copy into the
// caller's memory is made when the submission completes.
#pragma once
#include "serial_ring.h"
#include "vk_allocator.h"
#include "vk_profiler.h"
#include "vk_timeline.h"

namespace switchyard::vk_impl {

constexpr uint32_t kRingId = UINT32_MAX;  // Range id of the staging ring
constexpr uint64_t kRingBytes = 32ull << 20;
constexpr uint64_t kRingChunk = 8ull << 20;

class Transfer {
 public:
  Transfer(Context& c, Allocator& a, Timeline& t, Profiler& p)
      : c_(c), alloc_(a), t_(t), prof_(p) {}

  void upload(Alloc* dst, size_t off, const void* src, size_t n);
  // Zero-copy: complete on return. Staged: complete once the submission
  // that copies it retires.
  void download(Alloc* src, size_t off, void* dst, size_t n);
  void copy(Alloc* src, size_t so, Alloc* dst, size_t dof, size_t n);

  // The ring's regions and the host copies of submissions up to `done`.
  void retire_through(uint64_t done);
  // Drops downloads nobody waited for (at teardown: their targets may be gone).
  void drop_host_copies() { host_copies_.clear(); }
  void destroy();

 private:
  uint64_t ring_reserve(uint64_t n);
  bool ring_cached() const {
    return c_.mem.staging >= 0 && (c_.p.mem.memoryTypes[c_.mem.staging].propertyFlags &
                                   VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  }
  // A vkCmdCopyBuffer in the transfer command buffer, after a barrier if it
  // touches what earlier copies there wrote or read.
  void record_copy(VkBuffer src, Range rs, VkBuffer dst, Range rd, const char* kind);

  Context& c_;
  Allocator& alloc_;
  Timeline& t_;
  Profiler& prof_;
  HostBuf ring_;
  SerialRing ring_regions_{kRingBytes};
  DeferredCopies host_copies_;
};

}  // namespace switchyard::vk_impl
