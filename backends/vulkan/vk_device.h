// SPDX-License-Identifier: MIT
// VulkanDevice: the Vulkan backend's Device. Internal to backends/vulkan.
//
// A small front end (the Device overrides, the lock, set-up on first use and
// teardown) over parts that each own their state and their Vulkan objects:
//   vk_context    the logical device, queue, pools, layouts, feature
//                 decisions, device-lost and pending-error state
//   vk_allocator  memory types, blocks, suballocation, budget, deferred frees
//   vk_timeline   submission serials, fences, batching, retire hooks
//   vk_transfer   uploads, downloads and copies (zero-copy or staging ring)
//   vk_pipelines  pipelines per kernel, mode and flags; the on-disk cache
//   vk_recording  Programs: launch tables, descriptor sets, barriers, replay
//   vk_profiler   timestamp queries for the profiler
// Launch translation (params, descriptors, grids) is in vk_launch, instance
// and device facts in vk_instance, block bookkeeping in vk_memory.
//
// Parts refer to each other by reference, in one direction: the context is
// below everything; the allocator and the timeline use only the context; the
// profiler uses the timeline; transfers use the allocator, timeline and
// profiler; the recorder uses those and the pipelines. The
// timeline tells the others when work completes through hooks set here.
#pragma once
#include <algorithm>
#include <memory>
#include <mutex>

#include "vk_allocator.h"
#include "vk_context.h"
#include "vk_pipelines.h"
#include "vk_profiler.h"
#include "vk_recording.h"
#include "vk_timeline.h"
#include "vk_transfer.h"

namespace switchyard::vk_impl {

// The tuning file of a device and driver: SWITCHYARD_VK_GEMM_TUNING, else
// vk_gemm_tuning_<vendor>_<device>_<driver>.txt in the pipeline cache's
// directory ("" when there is none).
std::string tuning_path(const Physical& p);
// Its entries for this device and driver (none when absent, another
// driver's, or disk caches are off: SWITCHYARD_VK_NO_PIPELINE_CACHE).
std::vector<LaunchConfig::Tuned> load_tuning(const Physical& p, const std::string& path);

class VulkanDevice final : public BackendDevice {
 public:
  VulkanDevice(std::shared_ptr<Instance> in, Physical p, int index, const MemoryPolicy& mp);
  ~VulkanDevice() override;

  // At exit (see shutdown_at_exit): everything Vulkan is destroyed; later
  // releases just drop their records, other use is an error.
  void shutdown();

  // Mapped memory: every block in the zero-copy mode, host blocks (pinned
  // memory) in both.
  void* host_pointer(Buffer b) override;
  void wait_until_unused(Buffer b) override;
  // Every kernel of the table, the multi-tensor ones included (vk_multi.cpp).
  bool supports(Kernel) const override { return true; }
  bool gemm_reads(DType) const override { return true; }  // gemm.comp's 16-bit loads
  // And its 16-bit stores, unless the product's K would run as passes that
  // add to C (the loop budget's parts, or blocks of a binding range), which
  // would round each pass: then f32 and a cast. (Conservatively f32 too
  // before the device is set up: the limits are not known yet.)
  bool gemm_writes(const GemmParams& p) const override;

  // Compiles the kernel's GLSL (vk_custom.h) for this device's Vulkan
  // version, within its workgroup limits.
  void prepare_custom(const KernelSpec& spec, int64_t id) override;
  std::string custom_unavailable_reason() const override;
  uint32_t grid_stride_workgroups() override;
  // `switchyard tune` (vk_tune.cpp): the GEMM shapes run after tune_begin
  // timed in every variant; the winners kept and written next to the
  // pipeline cache. While tune_finish runs, the device's GEMMs run the
  // variant being timed: no other thread should use the device then, and
  // Programs recorded before it keep their plans.
  void tune_begin() override;
  std::vector<std::string> tune_finish(int reps) override;
  // Custom kernels index their arguments from 0: each must start a descriptor.
  size_t custom_arg_alignment() const override {
    return std::max<size_t>(c_.p.props.limits.minStorageBufferOffsetAlignment, 4);
  }

 private:
  Buffer allocate_impl(size_t bytes) override { return allocate_in(bytes, false); }
  Buffer allocate_host_impl(size_t bytes) override { return allocate_in(bytes, true); }
  void release_impl(Buffer b) override;
  void upload_impl(Buffer dst, size_t off, const void* src, size_t n) override;
  void download_impl(Buffer src, size_t off, void* dst, size_t n) override;
  void copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t n) override;
  void execute_impl(const Program& prog, std::span<const Binding> bind) override;
  void synchronize_impl() override;
  void cancel_pending_downloads() noexcept override;

  // Creates the logical device and the parts' objects on first use. Set-up
  // that fails (a bad setting, out of memory) leaves nothing behind and
  // throws each time.
  void ensure();
  // DeviceLost, repeating the first loss's message, once the device is lost.
  void throw_if_lost() const;
  void destroy();
  // Teardown of a device taken for hung whose work is still running: its
  // objects may be in use, so none is destroyed; the handles are forgotten
  // and the driver keeps them until the process ends.
  void abandon();
  Buffer allocate_in(size_t bytes, bool host);
  // Completes what finished and gives back blocks that emptied: a
  // dedicated block whose tensor was freed, or every empty block when `all`.
  // Recorded descriptor sets may name the blocks, so recordings go too.
  bool trim(bool all);
  void retire_and_trim();

  void note_shapes(const Program& prog);  // while tuning: its GEMMs' shapes

  mutable std::mutex mu_;
  bool noting_ = false;  // between tune_begin and tune_finish
  std::vector<LaunchConfig::Tuned> noted_;
  bool ready_ = false;  // ensure() completed
  bool shut_down_ = false;
  Context c_;
  Allocator alloc_{c_};
  Timeline timeline_{c_};
  Profiler prof_{c_, timeline_};
  Pipelines pipes_{c_};
  Transfer xfer_{c_, alloc_, timeline_, prof_};
  Recorder rec_{c_, alloc_, timeline_, pipes_, prof_};
};

}  // namespace switchyard::vk_impl
