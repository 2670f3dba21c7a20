// SPDX-License-Identifier: MIT
// The backend contract: what a device implementation provides (buffers,
// transfers, Program execution) and the counters tests and benchmarks read.
// User code does not need this header; backends and the runtime do.
#pragma once
// Marks the backend API, so user-only code can check it stays out.
#define SWITCHYARD_BACKEND_API 1
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/backend/kernels.h"
#include "switchyard/backend/program.h"
#include "switchyard/device.h"

namespace switchyard {

struct KernelSpec;

// Counters tests and benchmarks read. "allocations" are real device
// allocations, not hits in the runtime's buffer cache.
struct Counters {
  uint64_t submissions = 0;
  uint64_t kernel_launches = 0;
  uint64_t buffer_allocations = 0;
  uint64_t buffer_releases = 0;
  uint64_t bytes_uploaded = 0;
  uint64_t bytes_downloaded = 0;
  uint64_t bytes_copied = 0;
  uint64_t bytes_in_use = 0;
  uint64_t peak_bytes_in_use = 0;
  // GPU backends: real queue submissions (vkQueueSubmit; on CUDA a graph
  // launch, or each launch of a Program run eagerly), command buffers
  // recorded (CUDA: graphs captured), descriptor sets allocated, device-memory
  // allocations (blocks that tensors are suballocated from; cudaMalloc and
  // cudaHostAlloc calls), and validation-layer messages.
  uint64_t queue_submits = 0;
  uint64_t command_recordings = 0;
  uint64_t descriptor_set_allocations = 0;
  uint64_t memory_allocations = 0;
  uint64_t validation_messages = 0;
  // Device memory the backend holds from the driver, in use or kept for
  // reuse (CUDA's caching allocator, Vulkan's blocks).
  uint64_t bytes_reserved = 0;
  uint64_t launches_by_kernel[size_t(kNumKernels)] = {};  // indexed by Kernel
  // Bytes the launched kernels' arguments span (read or written), from the
  // Programs' argument extents: the memory traffic a step asks for, not
  // counting re-reads a kernel makes of the same bytes.
  uint64_t kernel_bytes = 0;
  uint64_t kernel_bytes_by_kernel[size_t(kNumKernels)] = {};
  // Floating-point operations of the launched GEMMs and convolutions
  // (2 per multiply-add; kernel_flops in kernels.h), per kernel.
  uint64_t kernel_flops_by_kernel[size_t(kNumKernels)] = {};
  // Vulkan memory (docs/vulkan.md): flushes and invalidates of non-coherent
  // mapped memory, blocks placed in the fallback heap once the first was
  // over its budget, and host reads of transferred data (downloads, the
  // ring) from mapped memory that is not host-cached.
  uint64_t memory_flushes = 0;
  uint64_t memory_invalidates = 0;
  uint64_t fallback_blocks = 0;
  uint64_t uncached_host_reads = 0;
  // CUDA: graphs given a run's new addresses or params by cudaGraphExecUpdate
  // instead of being captured and instantiated again.
  uint64_t command_updates = 0;
  // Vulkan: recordings evicted (past 256 of them, for launch-table space,
  // or to give their descriptor sets back when the pools could not grow:
  // the driver's memory, SWITCHYARD_VK_MAX_DESCRIPTOR_SETS).
  uint64_t recording_evictions = 0;
};

// Public non-virtual methods check arguments and keep the counters; the
// private *_impl methods are what a backend implements.
//
// The contract for asynchronous backends:
// - upload, download, copy and execute are enqueued in order on one queue;
//   synchronize() waits for all of them. Each is ordered after earlier work
//   that touches the same buffer (so a backend writing zero-copy memory from
//   the host must first wait for queued readers of it).
// - upload() has consumed `src` when it returns (copied it or staged it).
// - download() fills `dst` by the next synchronize().
// - release() may be called while queued work still uses the buffer: the
//   runtime reuses released buffers only for later queued work, so a backend
//   must not return the memory to the system before that work completes.
// - execute() runs a Program over `bindings` (one per slot); the same Program
//   (same id) comes back every training step, possibly with other bindings
//   and other scalar params, so a backend may cache what it recorded.
// Calls of the device contract that a test can make fail (inject_fault).
enum class FaultOp : uint8_t { allocate, upload, download, copy, execute, synchronize };
inline constexpr int kNumFaultOps = 6;
const char* fault_op_name(FaultOp op);

class BackendDevice : public Device {
 public:
  explicit BackendDevice(DeviceInfo info) : Device(std::move(info)) {}

  // Fault injection, for tests: the `nth` next call of `op` (1 = the very
  // next) fails before the backend sees it, as a failing device would:
  // allocate throws OutOfMemory, the others Error, each message saying the
  // fault was injected. 0 disarms. `times` calls in a row fail from there
  // (2 defeats one retry, as the buffer cache's retry after an allocation
  // failure).
  void inject_fault(FaultOp op, uint64_t nth, uint32_t times = 1);
  // Whether the armed fault of `op` has fired (and disarmed itself).
  bool fault_fired(FaultOp op) const;

  const Counters& counters() const { return counters_; }
  void reset_peak() { counters_.peak_bytes_in_use = counters_.bytes_in_use; }

  Buffer allocate(size_t bytes);  // throws OutOfMemory
  // Host memory this device copies from and to directly, without staging
  // (page-locked / host-visible): what Tensor::pin_memory() uses. host_pointer()
  // gives its address. An empty Buffer when the device has none. Released
  // with release(), which waits for queued copies as for any buffer.
  Buffer allocate_host(size_t bytes);
  void release(Buffer b);
  void upload(Buffer dst, size_t offset, const void* src, size_t bytes);
  void download(Buffer src, size_t offset, void* dst, size_t bytes);
  void copy(Buffer src, size_t src_offset, Buffer dst, size_t dst_offset, size_t bytes);
  void execute(const Program& p, std::span<const Binding> bindings);
  // A synchronize that throws fails the downloads waiting on it: their
  // callers see the error and may free the targets, so the backend drops
  // them (cancel_pending_downloads) before the exception leaves.
  void synchronize() {
    try {
      maybe_fail(FaultOp::synchronize);
      synchronize_impl();
    } catch (...) {
      cancel_pending_downloads();
      throw;
    }
  }
  // Host pointer to the buffer's memory when the device shares it with the
  // host (CPU, zero-copy GPU memory, allocate_host), else nullptr.
  virtual void* host_pointer(Buffer) { return nullptr; }
  // Waits until no queued work uses the buffer, so the host may write it
  // through host_pointer(). The default waits for everything.
  virtual void wait_until_unused(Buffer) { synchronize(); }
  virtual bool supports(Kernel k) const = 0;
  // Whether the gemm kernel reads A and B of dtype t (GemmParams::ab_dtype):
  // f32 everywhere; bf16 and f16 where the backend says so. Elsewhere the
  // ops widen 16-bit operands first (two casts more).
  virtual bool gemm_reads(DType t) const { return t == DType::f32; }
  // Whether the gemm kernel writes this product's output in its
  // GemmParams::c_dtype: f32 everywhere; bf16 and f16 where the backend
  // says so (rounding the f32 result once: a backend that would split K
  // into passes adding to C says no for those products). Elsewhere the ops
  // round an f32 output (one cast more, and a transient f32 copy).
  virtual bool gemm_writes(const GemmParams& p) const { return p.c_dtype == DType::f32; }
  // Custom kernels (switchyard/custom.h): compiles `spec` (registry id
  // `id`) for this device, or loads it from the caches, so that Programs
  // launching it run. Called at every launch (a backend remembers what it
  // prepared); throws the compiler's errors, or why this device cannot run
  // it. The default: custom kernels are not supported here.
  virtual void prepare_custom(const KernelSpec& spec, int64_t id);
  // Byte alignment a custom kernel's argument must start at (a view
  // starting elsewhere is copied first): Vulkan's
  // minStorageBufferOffsetAlignment; 1 where any element address does.
  virtual size_t custom_arg_alignment() const { return 1; }
  // Workgroups along x that fill this device for a grid-stride kernel
  // (KernelSpec::grid_stride).
  virtual uint32_t grid_stride_workgroups() { return 65535; }
  // Why prepare_custom cannot compile kernels here ("" when it can).
  virtual std::string custom_unavailable_reason() const {
    return "custom kernels are not supported on " + str();
  }
  // `switchyard tune`: tune_begin() starts noting the shapes of the
  // launches this device has variants of (Vulkan: its GEMMs) as Programs
  // run; tune_finish() then times each shape's candidate variants (`reps`
  // timed runs each, after a warm-up), keeps the fastest for this process,
  // writes them where later processes on this device and driver read them,
  // and returns a line per shape (the last names the file). The defaults
  // throw: nothing to tune on this device.
  virtual void tune_begin();
  virtual std::vector<std::string> tune_finish(int reps);

 protected:
  Counters counters_;
  void maybe_fail(FaultOp op);  // throws when an injected fault is due

 private:
  uint64_t fault_countdown_[kNumFaultOps] = {};  // atomic_ref'd; 0: none armed
  uint32_t fault_repeats_[kNumFaultOps] = {};    // further failures after the first
  bool fault_fired_[kNumFaultOps] = {};

 private:
  virtual Buffer allocate_impl(size_t bytes) = 0;
  virtual Buffer allocate_host_impl(size_t) { return {}; }
  virtual void release_impl(Buffer b) = 0;
  virtual void upload_impl(Buffer dst, size_t offset, const void* src, size_t bytes) = 0;
  virtual void download_impl(Buffer src, size_t offset, void* dst, size_t bytes) = 0;
  virtual void copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t bytes) = 0;
  virtual void execute_impl(const Program& p, std::span<const Binding> bindings) = 0;
  virtual void synchronize_impl() = 0;
  // Downloads not yet written to their targets must never be (a backend
  // that copies to the target after the device finishes drops those
  // copies). Called when synchronize() fails; must not throw.
  virtual void cancel_pending_downloads() noexcept {}
};

// The backend side of a device handle (every Device is one).
inline BackendDevice& backend_of(Device& d) { return static_cast<BackendDevice&>(d); }
inline const BackendDevice& backend_of(const Device& d) {
  return static_cast<const BackendDevice&>(d);
}
// device(name), as its backend side.
inline BackendDevice& backend_device(std::string_view name) { return backend_of(device(name)); }

// Adds a backend at run time (a plugin, or a test double). Its devices are
// then named "<name>:<index>". Throws if the name is taken.
void register_backend(BackendEntry entry);

}  // namespace switchyard
