// SPDX-License-Identifier: MIT
// The Vulkan timeline: command buffers and fences, the batch of work waiting
// to be submitted, submission serials and their completion (see vk_timeline.h).
#include "vk_timeline.h"

namespace switchyard::vk_impl {
namespace {

constexpr VkPipelineStageFlags kWork =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kWrites = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
constexpr VkAccessFlags kAll = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                               VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;

}  // namespace

VkFence Timeline::get_fence() {
  if (!free_fences_.empty()) {
    VkFence f = free_fences_.back();
    free_fences_.pop_back();
    if (VkResult r = vk.vkResetFences(c_.dev, 1, &f); r != VK_SUCCESS) {
      vk.vkDestroyFence(c_.dev, f, nullptr);  // its state is unknown: never reused
      c_.check(r, "submit", "vkResetFences");
    }
    return f;
  }
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence f;
  c_.check(vk.vkCreateFence(c_.dev, &fci, nullptr, &f), "submit", "vkCreateFence");
  c_.set_name(VK_OBJECT_TYPE_FENCE, f, "submission fence");
  return f;
}

VkCommandBuffer Timeline::get_cb() {
  if (!free_cbs_.empty()) {
    VkCommandBuffer cb = free_cbs_.back();
    free_cbs_.pop_back();
    if (VkResult r = vk.vkResetCommandBuffer(cb, 0); r != VK_SUCCESS) {
      vk.vkFreeCommandBuffers(c_.dev, c_.cmd_pool, 1, &cb);
      c_.check(r, "submit", "vkResetCommandBuffer");
    }
    return cb;
  }
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = c_.cmd_pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb;
  c_.check(vk.vkAllocateCommandBuffers(c_.dev, &ai, &cb), "submit", "vkAllocateCommandBuffers");
  c_.set_name(VK_OBJECT_TYPE_COMMAND_BUFFER, cb, "transfers");
  return cb;
}

void Timeline::barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags src_access,
                       VkPipelineStageFlags dst, VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  vk.vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Timeline::begin_cb(VkCommandBuffer cb) {
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  c_.check(vk.vkBeginCommandBuffer(cb, &bi), "submit", "vkBeginCommandBuffer");
  barrier(cb, kWork, kWrites, kWork, kAll);
}

void Timeline::end_cb(VkCommandBuffer cb) {
  barrier(cb, kWork, kWrites, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  c_.check(vk.vkEndCommandBuffer(cb), "submit", "vkEndCommandBuffer");
}

VkCommandBuffer Timeline::transfer_cb() {
  if (!open_cb_) {
    VkCommandBuffer cb = get_cb();
    try {
      begin_cb(cb);
    } catch (...) {
      free_cbs_.push_back(cb);  // reset again before its next use
      throw;
    }
    open_cb_ = cb;
    open_hazards_.seen.clear();
  }
  return open_cb_;
}

void Timeline::close_transfer() {
  if (!open_cb_) return;
  end_cb(open_cb_);
  batch_.push_back(open_cb_);
  batch_transfer_.push_back(open_cb_);
  open_cb_ = VK_NULL_HANDLE;
}

uint64_t Timeline::flush() {
  close_transfer();
  if (batch_.empty()) return next_serial_ - 1;
  VkFence fence = get_fence();
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = uint32_t(batch_.size());
  si.pCommandBuffers = batch_.data();
  int64_t submit_ns = profile::enabled() ? profile::now_ns() : 0;
  VkResult r;
  {
    profile::Span span(profile::Track::submission, "vkQueueSubmit", &c_.owner);
    r = vk.vkQueueSubmit(c_.queue, 1, &si, fence);
  }
  if (r != VK_SUCCESS) {
    // The batch stays, to be submitted with the next one: everything in it
    // (programs, uploads) was acknowledged to the runtime already, so
    // dropping it would lose values silently. Downloads whose synchronize
    // fails are cancelled through cancel_pending_downloads().
    free_fences_.push_back(fence);
    batch_timings_.clear();
    c_.check(r, "submit", "vkQueueSubmit");
  }
  bump(c_.counters.queue_submits);
  inflight_.push_back(
      {next_serial_, fence, std::move(batch_transfer_), std::move(batch_timings_), submit_ns});
  batch_transfer_.clear();
  batch_timings_.clear();
  batch_.clear();
  batch_has_program_ = false;
  return next_serial_++;
}

uint64_t Timeline::enqueue_program(VkCommandBuffer cb) {
  if (batch_has_program_) flush();
  close_transfer();
  batch_.push_back(cb);
  batch_has_program_ = true;
  return next_serial_;
}

void Timeline::retire(bool all, uint64_t upto) {
  if (all) upto = next_serial_ - 1;
  while (!inflight_.empty()) {
    InFlight& f = inflight_.front();
    if (f.serial <= upto) {
      // Bounded: a device that never finishes is lost, not waited on forever
      // (under the device's lock).
      VkResult r = vk.vkWaitForFences(c_.dev, 1, &f.fence, VK_TRUE, c_.wait_limit_ms * 1000000ull);
      if (r == VK_TIMEOUT) {
        c_.lost = c_.hung = true;
        std::string m = cat("[synchronize] expected a submission on ", c_.name(),
                            " to complete within ", c_.wait_limit_ms,
                            " ms (SWITCHYARD_VK_WAIT_LIMIT_MS), found it still running: the "
                            "device is taken for hung and lost; every later use of it throws "
                            "(other devices and the CPU still work)");
        if (c_.lost_what.empty()) c_.lost_what = m;
        throw DeviceLost(m);
      }
      c_.check(r, "synchronize", "vkWaitForFences");
    } else if (VkResult r = vk.vkGetFenceStatus(c_.dev, f.fence); r != VK_SUCCESS) {
      if (r == VK_NOT_READY) break;
      c_.check(r, "synchronize", "vkGetFenceStatus");  // VK_ERROR_DEVICE_LOST: not "not ready"
    }
    done_serial_ = f.serial;
    if (on_complete_) on_complete_(f);
    free_fences_.push_back(f.fence);
    for (VkCommandBuffer cb : f.transfer_cbs) free_cbs_.push_back(cb);
    inflight_.pop_front();
  }
  for (auto& hook : on_retire_) hook(done_serial_);
}

void Timeline::wait_for(uint64_t serial) {
  if (serial == 0) return;
  if (serial >= next_serial_) flush();
  serial = std::min(serial, next_serial_ - 1);  // nothing was recorded under it
  if (serial > done_serial_) retire(false, serial);
}

void Timeline::wait_idle() {
  flush();
  retire(true);
}

bool Timeline::settle(uint64_t ms) {
  std::vector<VkFence> fences;
  for (auto& f : inflight_) fences.push_back(f.fence);
  if (fences.empty()) return true;
  const VkResult r =
      vk.vkWaitForFences(c_.dev, uint32_t(fences.size()), fences.data(), VK_TRUE, ms * 1000000ull);
  // VK_ERROR_DEVICE_LOST: the driver gave up on the work; its objects may be
  // destroyed (the specification allows it on a lost device).
  return r == VK_SUCCESS || r == VK_ERROR_DEVICE_LOST;
}

void Timeline::destroy() {
  for (auto& f : inflight_) vk.vkDestroyFence(c_.dev, f.fence, nullptr);
  for (VkFence f : free_fences_) vk.vkDestroyFence(c_.dev, f, nullptr);
  inflight_.clear();
  free_fences_.clear();
  free_cbs_.clear();  // freed with the command pool
  batch_.clear();
  batch_transfer_.clear();
  batch_timings_.clear();
  batch_has_program_ = false;
  open_cb_ = VK_NULL_HANDLE;
}

}  // namespace switchyard::vk_impl
