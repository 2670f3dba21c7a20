// SPDX-License-Identifier: MIT
// VulkanDevice: the front end over the parts (see vk_device.h), and the
// backend entry point (vulkan_backend) that lists the devices.
#include "vk_device.h"

#include <algorithm>

#include "switchyard/custom.h"
#include "switchyard/settings.h"
#include "units.h"
#include "vk_custom.h"

namespace switchyard::vk_impl {

VulkanDevice::VulkanDevice(std::shared_ptr<Instance> in, Physical p, int index,
                           const MemoryPolicy& mp)
    : BackendDevice(make_info(p, index, mp)),
      c_(*this, counters_, std::move(in), std::move(p), mp) {
  // When submissions complete: the profiler reads their timestamps, then
  // downloads are copied out and the staging ring freed, released tensors
  // are freed, and the status word is read.
  timeline_.on_complete([this](InFlight& f) { prof_.harvest(f); });
  timeline_.on_retire([this](uint64_t done) { xfer_.retire_through(done); });
  timeline_.on_retire([this](uint64_t done) { alloc_.retire_through(done); });
  timeline_.on_retire([this](uint64_t) { rec_.check_status(); });
  c_.on_lost = [this] {
    if (!timeline_.settle(std::min<uint64_t>(c_.wait_limit_ms, 2000))) c_.hung = true;
  };
  std::lock_guard lock(c_.in->mu);
  c_.in->counters.push_back(&counters_.validation_messages);
}

VulkanDevice::~VulkanDevice() {
  {
    std::lock_guard lock(c_.in->mu);
    std::erase(c_.in->counters, &counters_.validation_messages);
  }
  try {
    destroy();
  } catch (...) {
  }
}

void VulkanDevice::shutdown() {
  std::lock_guard lock(mu_);
  destroy();
  shut_down_ = true;
}

void VulkanDevice::ensure() {
  if (shut_down_) throw Error(cat("[vulkan] ", str(), " was shut down (the program is exiting)"));
  if (ready_) {
    throw_if_lost();
    return;
  }
  try {
    c_.create();
    c_.lc.tuned = load_tuning(c_.p, tuning_path(c_.p));
    pipes_.load_cache();
    rec_.create();
    ready_ = true;
  } catch (...) {
    destroy();
    throw;
  }
}

bool VulkanDevice::gemm_writes(const GemmParams& p) const {
  if (!is_half(p.c_dtype)) return p.c_dtype == DType::f32;
  std::lock_guard lock(mu_);
  if (!ready_) return false;
  const int64_t k_part = gemm_k_part(c_.lc);
  return (k_part <= 0 || p.k <= k_part) && gemm_fits_bindings(c_.lc, p, p.has_bias);
}

void VulkanDevice::throw_if_lost() const {
  if (c_.lost)
    throw DeviceLost(cat("[vulkan] expected a working device, found ", str(),
                         " lost: it cannot be used again in this process; other devices and "
                         "the CPU still work. It was lost here: ",
                         c_.lost_what.empty() ? "VK_ERROR_DEVICE_LOST" : c_.lost_what));
}

void VulkanDevice::destroy() {
  ready_ = false;
  if (!c_.dev) return;
  // A device taken for hung (a wait past SWITCHYARD_VK_WAIT_LIMIT_MS) may
  // never finish: vkDeviceWaitIdle could block forever, at exit too. Its
  // work gets a bounded wait; if it is still running, nothing is destroyed.
  // A loss the driver reported needs no wait: lost work ends in finite time
  // and a lost device's objects may be destroyed.
  if (c_.hung && !timeline_.settle(std::min<uint64_t>(c_.wait_limit_ms, 2000))) {
    abandon();
    return;
  }
  if (c_.queue) {
    // What is still waiting in the batch (uploads, copies into buffers that
    // die with the device) is not submitted: nothing can observe it, and at
    // exit the validation layer's state may already be torn down (a submit
    // from this atexit handler crashed in it in about one run of ten of
    // the staging suites). Submitted work completes first.
    vk.vkDeviceWaitIdle(c_.dev);
  }
  xfer_.drop_host_copies();  // downloads nobody waited for: their targets may be gone
  if (!c_.lost) {
    try {
      timeline_.retire(true);
    } catch (...) {
    }
  }
  pipes_.save_cache();
  // In reverse order of use: nothing destroyed here is named by what remains.
  rec_.destroy();
  pipes_.destroy();
  xfer_.destroy();
  timeline_.destroy();
  prof_.destroy();
  alloc_.destroy();
  c_.destroy();
}

void VulkanDevice::abandon() {
  xfer_.drop_host_copies();
  emit_message(cat("[vulkan] ", str(),
                   " is hung: the work it was given has not finished, so its Vulkan objects are "
                   "left to the driver, not destroyed"));
  c_.in->abandoned_device = true;
  c_.dev = VK_NULL_HANDLE;  // Context::destroy then only forgets the handles
  c_.destroy();
}

void* VulkanDevice::host_pointer(Buffer b) {
  if (!b) return nullptr;
  std::lock_guard lock(mu_);
  if (!c_.dev) return nullptr;
  // Only memory the host may use as its own: coherent (no flush or
  // invalidate between its users' reads and writes) and, for tensors'
  // blocks, cached (no uncached reads); callers then fall back to upload and
  // download. Pinned blocks are coherent (the policy's), cached where the
  // device has such memory (a mobile GPU may offer only write-combined
  // coherent memory: the host writes a batch there, the device copies it).
  const Block& blk = alloc_.block(static_cast<Alloc*>(b.handle));
  if (!blk.coherent || (!blk.cached && !blk.host)) return nullptr;
  return alloc_.mapped(static_cast<Alloc*>(b.handle));
}

void VulkanDevice::wait_until_unused(Buffer b) {
  if (!b) return;
  std::lock_guard lock(mu_);
  if (!c_.dev) return;
  throw_if_lost();  // a hung device would be waited on again
  timeline_.wait_for(static_cast<Alloc*>(b.handle)->last_use);
}

bool VulkanDevice::trim(bool all) {
  if (!alloc_.trimmable(all)) return false;
  timeline_.wait_idle();
  rec_.drop_all();
  alloc_.trim(all);
  return true;
}

void VulkanDevice::retire_and_trim() {
  timeline_.retire(false);
  if (alloc_.take_dead_dedicated()) trim(false);
}

Buffer VulkanDevice::allocate_in(size_t bytes, bool host) {
  std::lock_guard lock(mu_);
  ensure();
  retire_and_trim();
  std::string why;
  Alloc* a = alloc_.try_allocate(bytes, host, why);
  if (!a) {
    // Finish queued work (its frees land in their blocks) and retry; then
    // give empty blocks back and retry once more.
    timeline_.wait_idle();
    a = alloc_.try_allocate(bytes, host, why);
    if (!a && trim(true)) a = alloc_.try_allocate(bytes, host, why);
  }
  if (!a)
    throw OutOfMemory(cat(host ? "[allocate_host] out of pinned host memory on "
                               : "[allocate] out of device memory on ",
                          str(), ": expected ", bytes, " bytes (", mib(bytes), ") to fit, found ",
                          why));
  return {a, bytes};
}

void VulkanDevice::release_impl(Buffer b) {
  std::lock_guard lock(mu_);
  auto* a = static_cast<Alloc*>(b.handle);
  if (!c_.dev) {  // shut down: the memory went with the device
    delete a;
    return;
  }
  alloc_.release(a, timeline_.done_serial());
}

void VulkanDevice::upload_impl(Buffer dst, size_t off, const void* src, size_t n) {
  std::lock_guard lock(mu_);
  ensure();
  xfer_.upload(static_cast<Alloc*>(dst.handle), off, src, n);
}

void VulkanDevice::download_impl(Buffer src, size_t off, void* dst, size_t n) {
  std::lock_guard lock(mu_);
  ensure();
  xfer_.download(static_cast<Alloc*>(src.handle), off, dst, n);
}

void VulkanDevice::copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t n) {
  std::lock_guard lock(mu_);
  ensure();
  xfer_.copy(static_cast<Alloc*>(src.handle), so, static_cast<Alloc*>(dst.handle), dof, n);
}

std::string VulkanDevice::custom_unavailable_reason() const { return shaderc_unavailable_reason(); }

uint32_t VulkanDevice::grid_stride_workgroups() {
  std::lock_guard lock(mu_);
  ensure();  // the launch configuration is chosen at set-up
  return c_.lc.grid_cap;
}

void VulkanDevice::prepare_custom(const KernelSpec& s, int64_t id) {
  {
    std::lock_guard lock(c_.custom_mu);
    if (c_.custom_spirv.count(id)) return;
  }
  const std::string what = cat("custom kernel ", s.name);
  SY_CHECK(!s.glsl.empty(), what.c_str(), "expected GLSL (KernelSpec::glsl) to run on ", str(),
           ", found none");
  const VkPhysicalDeviceLimits& l = c_.p.props.limits;
  const uint64_t inv = uint64_t(s.workgroup[0]) * s.workgroup[1] * s.workgroup[2];
  if (inv > l.maxComputeWorkGroupInvocations || s.workgroup[0] > l.maxComputeWorkGroupSize[0] ||
      s.workgroup[1] > l.maxComputeWorkGroupSize[1] ||
      s.workgroup[2] > l.maxComputeWorkGroupSize[2])
    throw DeviceLimit(cat("[", what, "] expected a workgroup within ", str(), "'s limits (",
                          l.maxComputeWorkGroupSize[0], "x", l.maxComputeWorkGroupSize[1], "x",
                          l.maxComputeWorkGroupSize[2], ", ", l.maxComputeWorkGroupInvocations,
                          " invocations), found ", s.workgroup[0], "x", s.workgroup[1], "x",
                          s.workgroup[2]));
  auto spirv = compile_glsl(s, c_.p.api);  // the usable version: min(device, instance)
  CustomDeviceCaps caps;
  caps.device = str();
  caps.float64 = c_.p.features.shaderFloat64;  // enabled at creation where present
  caps.int64 = c_.p.features.shaderInt64;
  caps.int16 = c_.p.features.shaderInt16;
  caps.subgroup_in_compute = c_.p.subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT;
  caps.subgroup_ops = c_.p.subgroup.supportedOperations;
  caps.max_shared_bytes = l.maxComputeSharedMemorySize;
  check_custom_module(s, *spirv, caps);
  std::lock_guard lock(c_.custom_mu);
  c_.custom_spirv.emplace(id, std::move(spirv));
}

void VulkanDevice::execute_impl(const Program& prog, std::span<const Binding> bind) {
  std::lock_guard lock(mu_);
  ensure();
  if (prog.instrs.empty()) return;
  if (noting_) note_shapes(prog);
  retire_and_trim();
  rec_.execute(prog, bind);
}

void VulkanDevice::synchronize_impl() {
  std::lock_guard lock(mu_);
  if (!c_.dev) return;
  throw_if_lost();
  timeline_.wait_idle();
  c_.throw_pending();
}

// Found by fault injection: a failed fence wait, then the host copy of a
// download into the caller's vector, freed by then.
void VulkanDevice::cancel_pending_downloads() noexcept {
  std::lock_guard lock(mu_);
  xfer_.drop_host_copies();
}

namespace {

// Devices and the instance, torn down by an atexit handler registered after
// the loader, driver and layers were loaded: handlers and static destructors
// run in reverse order, so this runs while those libraries are intact (the
// registry that holds the devices is destroyed later, after them).
struct Live {
  std::vector<std::weak_ptr<VulkanDevice>> devices;
  std::weak_ptr<Instance> instance;
};
Live* live = nullptr;  // leaked on purpose: used at exit

void shutdown_at_exit() {
  if (!live) return;
  for (auto& w : live->devices)
    if (auto d = w.lock()) d->shutdown();
  if (auto in = live->instance.lock()) in->shutdown();
}

}  // namespace
}  // namespace switchyard::vk_impl

namespace switchyard::detail {

BackendEntry vulkan_backend() {
  using namespace vk_impl;
  BackendEntry e{"vulkan", false, "", {}};
  std::string why;
  auto in = create_instance(why);
  if (!in) {
    e.reason = why;
    return e;
  }
  uint32_t n = 0;
  VkResult r = vk.vkEnumeratePhysicalDevices(in->inst, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  if (r == VK_SUCCESS && n) r = vk.vkEnumeratePhysicalDevices(in->inst, &n, pds.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    e.reason = cat("vkEnumeratePhysicalDevices failed: ", result_name(r));
    return e;
  }
  std::string skipped;
  bool force_staging = env_on("SWITCHYARD_VK_FORCE_STAGING");
  for (VkPhysicalDevice pd : pds) {
    Physical p = query(pd, in->api);
    if (std::string u = unsupported(p, kBindings); !u.empty()) {
      skipped += cat(skipped.empty() ? "" : "; ", p.props.deviceName, ": ", u);
      continue;
    }
    try {
      apply_simulation(p);
    } catch (const Error& x) {
      skipped += cat(skipped.empty() ? "" : "; ", p.props.deviceName, ": ", x.what());
      continue;
    }
    const MemoryPolicy mp = choose_memory(p, force_staging);
    e.devices.push_back(
        std::make_shared<VulkanDevice>(in, std::move(p), int(e.devices.size()), mp));
  }
  live = new Live;
  live->instance = in;
  for (auto& d : e.devices) live->devices.push_back(std::static_pointer_cast<VulkanDevice>(d));
  std::atexit(shutdown_at_exit);
  e.available = !e.devices.empty();
  if (!e.available)
    e.reason = pds.empty()
                   ? "no Vulkan device found (is a driver installed? mesa-vulkan-drivers provides "
                     "lavapipe; VK_ICD_FILENAMES may point elsewhere)"
                   : "no Vulkan device can run Switchyard: " + skipped;
  return e;
}

}  // namespace switchyard::detail
