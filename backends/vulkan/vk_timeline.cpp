// VulkanDevice's timeline: command buffers and fences, the batch of work
// waiting to be submitted, submission serials and their completion.
#include "vk_device.h"

namespace switchyard::vk_impl {

VkFence VulkanDevice::get_fence() {
  if (!free_fences_.empty()) {
    VkFence f = free_fences_.back();
    free_fences_.pop_back();
    vk.vkResetFences(dev_, 1, &f);
    return f;
  }
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence f;
  check(vk.vkCreateFence(dev_, &fci, nullptr, &f), "submit", "vkCreateFence");
  return f;
}

VkCommandBuffer VulkanDevice::get_cb() {
  if (!free_cbs_.empty()) {
    VkCommandBuffer cb = free_cbs_.back();
    free_cbs_.pop_back();
    vk.vkResetCommandBuffer(cb, 0);
    return cb;
  }
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = cmd_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb;
  check(vk.vkAllocateCommandBuffers(dev_, &ai, &cb), "submit", "vkAllocateCommandBuffers");
  return cb;
}

void VulkanDevice::barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags src_access,
                           VkPipelineStageFlags dst, VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  vk.vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void VulkanDevice::begin_cb(VkCommandBuffer cb) {
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  vk.vkBeginCommandBuffer(cb, &bi);
  barrier(cb, kWork, kWrites, kWork, kAll);
}

void VulkanDevice::end_cb(VkCommandBuffer cb) {
  barrier(cb, kWork, kWrites, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  check(vk.vkEndCommandBuffer(cb), "submit", "vkEndCommandBuffer");
}

VkCommandBuffer VulkanDevice::transfer_cb() {
  if (!open_cb_) {
    open_cb_ = get_cb();
    begin_cb(open_cb_);
    open_hazards_.seen.clear();
  }
  return open_cb_;
}

void VulkanDevice::record_copy(VkBuffer src, Range rs, VkBuffer dst, Range rd, const char* kind) {
  int64_t q = profiling() ? query_reserve(2) : -1;
  VkCommandBuffer cb = transfer_cb();
  if (open_hazards_.conflict(rs) || open_hazards_.conflict(rd)) {
    barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
            VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    open_hazards_.seen.clear();
  }
  open_hazards_.seen.push_back(rs);
  open_hazards_.seen.push_back(rd);
  VkBufferCopy c{rs.begin, rd.begin, rd.end - rd.begin};
  if (q >= 0) {
    vk.vkCmdResetQueryPool(cb, qpool_, uint32_t(q), 2);
    vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool_, uint32_t(q));
  }
  vk.vkCmdCopyBuffer(cb, src, dst, 1, &c);
  if (q >= 0) {
    vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool_, uint32_t(q) + 1);
    ProfRec r;
    r.first = uint32_t(q), r.count = 2, r.name = kind, r.bytes = c.size;
    batch_prof_.push_back(std::move(r));
  }
}

void VulkanDevice::close_transfer() {
  if (!open_cb_) return;
  end_cb(open_cb_);
  batch_.push_back(open_cb_);
  batch_transfer_.push_back(open_cb_);
  open_cb_ = VK_NULL_HANDLE;
}

uint64_t VulkanDevice::flush() {
  close_transfer();
  if (batch_.empty()) return next_serial_ - 1;
  VkFence fence = get_fence();
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = uint32_t(batch_.size());
  si.pCommandBuffers = batch_.data();
  int64_t submit_ns = profile::enabled() ? profile::now_ns() : 0;
  VkResult r;
  {
    profile::Span span(profile::Track::submission, "vkQueueSubmit", this);
    r = vk.vkQueueSubmit(queue_, 1, &si, fence);
  }
  if (r != VK_SUCCESS) {
    free_fences_.push_back(fence);
    batch_prof_.clear();
    check(r, "submit", "vkQueueSubmit");
  }
  bump(counters_.queue_submits);
  inflight_.push_back(
      {next_serial_, fence, std::move(batch_transfer_), std::move(batch_prof_), submit_ns});
  batch_transfer_.clear();
  batch_prof_.clear();
  batch_.clear();
  batch_has_program_ = false;
  return next_serial_++;
}

uint64_t VulkanDevice::enqueue_program(VkCommandBuffer cb) {
  if (batch_has_program_) flush();
  close_transfer();
  batch_.push_back(cb);
  batch_has_program_ = true;
  return next_serial_;
}

void VulkanDevice::retire(bool all, uint64_t upto) {
  if (all) upto = next_serial_ - 1;
  while (!inflight_.empty()) {
    InFlight& f = inflight_.front();
    if (f.serial <= upto) {
      VkResult r = vk.vkWaitForFences(dev_, 1, &f.fence, VK_TRUE, UINT64_MAX);
      check(r, "synchronize", "vkWaitForFences");
    } else if (vk.vkGetFenceStatus(dev_, f.fence) != VK_SUCCESS) {
      break;
    }
    done_serial_ = f.serial;
    harvest(f);
    free_fences_.push_back(f.fence);
    for (VkCommandBuffer cb : f.transfer_cbs) free_cbs_.push_back(cb);
    inflight_.pop_front();
  }
  while (!host_copies_.empty() && host_copies_.front().serial <= done_serial_) {
    HostCopy& c = host_copies_.front();
    std::memcpy(c.dst, c.src, c.bytes);
    host_copies_.pop_front();
  }
  std::erase_if(ring_segs_, [&](const RingSeg& s) { return s.serial <= done_serial_; });
  std::erase_if(deferred_, [&](Alloc* a) {
    if (a->last_use > done_serial_) return false;
    free_alloc(a);
    return true;
  });
  // The status word is read and reset only when nothing that might set it
  // is in flight (the host's atomics do not order with the device's).
  std::atomic_ref<uint32_t> status(*reinterpret_cast<uint32_t*>(status_.mapped));
  if (inflight_.empty() && batch_.empty() && !open_cb_ && status.load() != 0) {
    uint32_t bits = status.exchange(0);
    if (bits & 1u)
      pending_error_ =
          cat("[cross_entropy] expected labels in [0, classes), found a label outside that "
              "range on ",
              str(), " (the loss and its gradient are NaN)");
  }
}

void VulkanDevice::wait_for(uint64_t serial) {
  if (serial == 0) return;
  if (serial >= next_serial_) flush();
  serial = std::min(serial, next_serial_ - 1);  // nothing was recorded under it
  if (serial > done_serial_) retire(false, serial);
}

void VulkanDevice::throw_pending() {
  if (pending_error_.empty()) return;
  std::string e = std::move(pending_error_);
  pending_error_.clear();
  throw Error(e);
}

void VulkanDevice::wait_idle() {
  flush();
  retire(true);
}

}  // namespace switchyard::vk_impl
