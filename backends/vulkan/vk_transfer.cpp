// SPDX-License-Identifier: MIT
// The Vulkan transfers: zero-copy or through the staging ring (see
// vk_transfer.h).
#include "vk_transfer.h"

#include <algorithm>
#include <cstring>

namespace switchyard::vk_impl {

namespace {

Range range_of(const Alloc* a, uint64_t off, uint64_t n, bool write) {
  return {a->block, a->offset + off, a->offset + off + n, write};
}

}  // namespace

uint64_t Transfer::ring_reserve(uint64_t n) {
  if (!ring_.buf) ring_ = alloc_.host_buffer(kRingBytes, MemRole::staging);
  // Regions in whole atoms: a flush of one never writes back another's
  // bytes (non-coherent memory).
  const uint64_t unit = std::max<uint64_t>(16, c_.p.props.limits.nonCoherentAtomSize);
  n = (n + unit - 1) / unit * unit;
  for (;;) {
    auto [begin, wait] = ring_regions_.probe(n);
    if (!wait) {
      ring_regions_.take(begin, n, t_.next_serial());
      return begin;
    }
    t_.wait_for(wait);
  }
}

void Transfer::record_copy(VkBuffer src, Range rs, VkBuffer dst, Range rd, const char* kind) {
  int64_t q = prof_.on() ? prof_.reserve(2) : -1;
  VkCommandBuffer cb = t_.transfer_cb();
  Hazards& hz = t_.transfer_hazards();
  if (hz.conflict(rs) || hz.conflict(rd)) {
    Timeline::barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                      VK_PIPELINE_STAGE_TRANSFER_BIT,
                      VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    hz.seen.clear();
  }
  hz.seen.push_back(rs);
  hz.seen.push_back(rd);
  VkBufferCopy c{rs.begin, rd.begin, rd.end - rd.begin};
  if (q >= 0) {
    vk.vkCmdResetQueryPool(cb, prof_.pool(), uint32_t(q), 2);
    vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, prof_.pool(), uint32_t(q));
  }
  vk.vkCmdCopyBuffer(cb, src, dst, 1, &c);
  if (q >= 0) {
    vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, prof_.pool(), uint32_t(q) + 1);
    QueryTiming r;
    r.first = uint32_t(q), r.count = 2, r.name = kind, r.bytes = c.size;
    t_.add_timing(std::move(r));
  }
}

void Transfer::upload(Alloc* a, size_t off, const void* src, size_t n) {
  const Block& b = alloc_.block(a);
  if (b.mapped) {
    t_.wait_for(a->last_use);  // queued readers and writers of it first
    int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
    const uint64_t at = a->offset + off;
    // On non-coherent memory the flush writes whole atoms: the atoms this
    // write covers only in part get the device's bytes first. Whole atoms
    // in between are overwritten, so they need no invalidate.
    if (!b.coherent && n) {
      alloc_.invalidate(b, at, 1);
      alloc_.invalidate(b, at + n - 1, 1);
    }
    std::memcpy(b.mapped + at, src, n);
    alloc_.flush(b, at, n);
    if (t0 >= 0) prof_.host_transfer("upload (zero-copy)", n, t0);
    return;
  }
  const char* s = static_cast<const char*>(src);
  for (size_t done = 0; done < n;) {
    size_t c = std::min<size_t>(kRingChunk, n - done);
    uint64_t r = ring_reserve(c);
    std::memcpy(ring_.mapped + r, s + done, c);
    alloc_.flush(ring_, r, c);
    record_copy(ring_.buf, {kRingId, r, r + c, false}, alloc_.block(a).buf,
                range_of(a, off + done, c, true), "upload (staging)");
    a->last_use = t_.next_serial();
    done += c;
    if (n > kRingChunk) t_.flush();  // large: overlap the next memcpy with this copy
  }
}

void Transfer::download(Alloc* a, size_t off, void* dst, size_t n) {
  const Block& b = alloc_.block(a);
  // Mapped memory the host does not cache (an APU's write-combined
  // device-local memory) is read through the staging ring when the ring is
  // cached (it would gain nothing where it is not).
  if (b.mapped && (b.cached || !ring_cached())) {
    t_.wait_for(a->last_use);
    c_.throw_pending();
    int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
    if (!b.cached) bump(c_.counters.uncached_host_reads);
    alloc_.invalidate(b, a->offset + off, n);
    std::memcpy(dst, b.mapped + a->offset + off, n);
    if (t0 >= 0) prof_.host_transfer("download (zero-copy)", n, t0);
    return;
  }
  char* d = static_cast<char*>(dst);
  for (size_t done = 0; done < n;) {
    size_t c = std::min<size_t>(kRingChunk, n - done);
    uint64_t r = ring_reserve(c);
    record_copy(alloc_.block(a).buf, range_of(a, off + done, c, false), ring_.buf,
                {kRingId, r, r + c, true}, "download (staging)");
    a->last_use = t_.next_serial();
    host_copies_.push(t_.next_serial(), ring_.mapped + r, d + done, c);
    done += c;
    if (n > kRingChunk) t_.flush();
  }
}

void Transfer::copy(Alloc* s, size_t so, Alloc* d, size_t dof, size_t n) {
  if (n == 0) return;
  Range rs = range_of(s, so, n, false), rd = range_of(d, dof, n, true);
  const char* kind = alloc_.block(s).host   ? "copy (pinned to device)"
                     : alloc_.block(d).host ? "copy (device to pinned)"
                                            : "copy (device)";
  if (overlaps(rs, rd)) {
    // vkCmdCopyBuffer forbids overlapping regions (the CPU backend's copy
    // is a memmove): go through a temporary range, freed when done.
    std::string why;
    Alloc* tmp = alloc_.try_allocate(n, false, why);
    if (!tmp)
      throw OutOfMemory(
          cat("[copy] no room for a ", n, "-byte temporary on ", c_.name(), ": ", why));
    Range rt = range_of(tmp, 0, n, true);
    record_copy(alloc_.block(s).buf, rs, alloc_.block(tmp).buf, rt, kind);
    rt.write = false;
    record_copy(alloc_.block(tmp).buf, rt, alloc_.block(d).buf, rd, kind);
    tmp->last_use = s->last_use = d->last_use = t_.next_serial();
    alloc_.release(tmp, t_.done_serial());
    return;
  }
  record_copy(alloc_.block(s).buf, rs, alloc_.block(d).buf, rd, kind);
  s->last_use = d->last_use = t_.next_serial();
}

void Transfer::retire_through(uint64_t done) {
  host_copies_.run_through(done, [&](const char* src, size_t n) {
    if (!ring_.cached) bump(c_.counters.uncached_host_reads);
    alloc_.invalidate(ring_, uint64_t(src - ring_.mapped), n);
  });
  ring_regions_.retire_through(done);
}

void Transfer::destroy() {
  alloc_.free(ring_);
  ring_regions_.clear();
  host_copies_.clear();
}

}  // namespace switchyard::vk_impl
