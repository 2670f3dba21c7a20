// VulkanDevice's transfers: uploads, downloads and copies, zero-copy or
// through the staging ring.
#include "vk_device.h"

namespace switchyard::vk_impl {

Range VulkanDevice::range_of(const Alloc* a, uint64_t off, uint64_t n, bool write) const {
  return {a->block, a->offset + off, a->offset + off + n, write};
}

uint64_t VulkanDevice::ring_reserve(uint64_t n) {
  if (!ring_.buf) ring_ = make_host_buffer(kRingBytes, false);
  n = (n + 15) & ~uint64_t(15);
  for (;;) {
    uint64_t begin = ring_head_ + n > ring_.size ? 0 : ring_head_;
    uint64_t need = 0;
    for (auto& s : ring_segs_)
      if (s.begin < begin + n && begin < s.end) need = std::max(need, s.serial);
    if (!need) {
      ring_head_ = begin + n;
      ring_segs_.push_back({begin, begin + n, next_serial_});
      return begin;
    }
    wait_for(need);
  }
}

void VulkanDevice::upload_impl(Buffer dst, size_t off, const void* src, size_t n) {
  std::lock_guard lock(mu_);
  ensure();
  auto* a = static_cast<Alloc*>(dst.handle);
  if (zero_copy_) {
    wait_for(a->last_use);  // queued readers and writers of it first
    int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
    std::memcpy(blocks_[a->block].mapped + a->offset + off, src, n);
    if (t0 >= 0) host_transfer("upload (zero-copy)", n, t0);
    return;
  }
  const char* s = static_cast<const char*>(src);
  for (size_t done = 0; done < n;) {
    size_t c = std::min<size_t>(kRingChunk, n - done);
    uint64_t r = ring_reserve(c);
    std::memcpy(ring_.mapped + r, s + done, c);
    record_copy(ring_.buf, {kRingId, r, r + c, false}, blocks_[a->block].buf,
                range_of(a, off + done, c, true), "upload (staging)");
    a->last_use = next_serial_;
    done += c;
    if (n > kRingChunk) flush();  // large: overlap the next memcpy with this copy
  }
}

void VulkanDevice::download_impl(Buffer src, size_t off, void* dst, size_t n) {
  std::lock_guard lock(mu_);
  ensure();
  auto* a = static_cast<Alloc*>(src.handle);
  if (zero_copy_) {
    wait_for(a->last_use);
    throw_pending();
    int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
    std::memcpy(dst, blocks_[a->block].mapped + a->offset + off, n);
    if (t0 >= 0) host_transfer("download (zero-copy)", n, t0);
    return;
  }
  char* d = static_cast<char*>(dst);
  for (size_t done = 0; done < n;) {
    size_t c = std::min<size_t>(kRingChunk, n - done);
    uint64_t r = ring_reserve(c);
    record_copy(blocks_[a->block].buf, range_of(a, off + done, c, false), ring_.buf,
                {kRingId, r, r + c, true}, "download (staging)");
    a->last_use = next_serial_;
    host_copies_.push_back({next_serial_, ring_.mapped + r, d + done, c});
    done += c;
    if (n > kRingChunk) flush();
  }
}

void VulkanDevice::copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t n) {
  std::lock_guard lock(mu_);
  ensure();
  auto* s = static_cast<Alloc*>(src.handle);
  auto* d = static_cast<Alloc*>(dst.handle);
  if (n == 0) return;
  Range rs = range_of(s, so, n, false), rd = range_of(d, dof, n, true);
  const char* kind = blocks_[s->block].host   ? "copy (pinned to device)"
                     : blocks_[d->block].host ? "copy (device to pinned)"
                                              : "copy (device)";
  if (overlaps(rs, rd)) {
    // vkCmdCopyBuffer forbids overlapping regions (the CPU backend's copy
    // is a memmove): go through a temporary range, freed when done.
    std::string why;
    Alloc* tmp = try_allocate(n, false, why);
    if (!tmp)
      throw OutOfMemory(cat("[copy] no room for a ", n, "-byte temporary on ", str(), ": ", why));
    Range rt = range_of(tmp, 0, n, true);
    record_copy(blocks_[s->block].buf, rs, blocks_[tmp->block].buf, rt, kind);
    rt.write = false;
    record_copy(blocks_[tmp->block].buf, rt, blocks_[d->block].buf, rd, kind);
    tmp->last_use = s->last_use = d->last_use = next_serial_;
    deferred_.push_back(tmp);
    return;
  }
  record_copy(blocks_[s->block].buf, rs, blocks_[d->block].buf, rd, kind);
  s->last_use = d->last_use = next_serial_;
}

}  // namespace switchyard::vk_impl
