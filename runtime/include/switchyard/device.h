// The Device interface: the narrow contract every backend implements, plus
// device selection by name ("cpu", "vulkan:1", "cuda", "auto").
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "switchyard/program.h"

namespace switchyard {

enum class DeviceType { cpu, integrated_gpu, discrete_gpu, virtual_gpu, other };
const char* device_type_name(DeviceType t);

struct DeviceInfo {
  std::string backend;  // "cpu", "vulkan", "cuda"
  int index = 0;
  std::string name;     // human-readable, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  DeviceType type = DeviceType::cpu;
  uint64_t memory_bytes = 0;
  std::vector<std::pair<std::string, std::string>> properties;  // backend extras
  // The device string: "cpu", "vulkan:0", "cuda:1".
  std::string str() const;
};

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
  uint64_t launches_by_kernel[size_t(Kernel::count_)] = {};  // indexed by Kernel
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
class Device {
 public:
  explicit Device(DeviceInfo info) : info_(std::move(info)) {}
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  std::string str() const { return info_.str(); }
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
  void synchronize() { synchronize_impl(); }
  // Host pointer to the buffer's memory when the device shares it with the
  // host (CPU, zero-copy GPU memory, allocate_host), else nullptr.
  virtual void* host_pointer(Buffer) { return nullptr; }
  // Waits until no queued work uses the buffer, so the host may write it
  // through host_pointer(). The default waits for everything.
  virtual void wait_until_unused(Buffer) { synchronize(); }
  virtual bool supports(Kernel k) const = 0;

 protected:
  Counters counters_;

 private:
  virtual Buffer allocate_impl(size_t bytes) = 0;
  virtual Buffer allocate_host_impl(size_t) { return {}; }
  virtual void release_impl(Buffer b) = 0;
  virtual void upload_impl(Buffer dst, size_t offset, const void* src, size_t bytes) = 0;
  virtual void download_impl(Buffer src, size_t offset, void* dst, size_t bytes) = 0;
  virtual void copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t bytes) = 0;
  virtual void execute_impl(const Program& p, std::span<const Binding> bindings) = 0;
  virtual void synchronize_impl() = 0;

  DeviceInfo info_;
};

// A backend enumerates its devices, or says why it has none.
struct BackendEntry {
  std::string name;
  bool available = false;
  std::string reason;  // why not available
  std::vector<std::shared_ptr<Device>> devices;
};

// Every backend known to this build, available or not, with its devices.
const std::vector<BackendEntry>& backends();
// Adds a backend at run time (a plugin, or a test double). Its devices are
// then named "<name>:<index>". Throws if the name is taken.
void register_backend(BackendEntry entry);
// Every usable device, in selection order.
std::vector<Device*> devices();
// Resolve a device string: cpu, vulkan, vulkan:1, cuda, cuda:0, auto.
// Throws Error listing what is available when the name is unknown or absent.
Device& device(std::string_view name);
// SWITCHYARD_DEVICE if set, else "auto".
Device& default_device();
Device& cpu();

}  // namespace switchyard
