// SPDX-License-Identifier: MIT
// Devices as users see them: pick one by name ("cpu", "vulkan:1", "cuda",
// "auto"), pass it to tensors and modules, wait for it. What a backend
// implements is in switchyard/backend/device.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace switchyard {

enum class DeviceType { cpu, integrated_gpu, discrete_gpu, virtual_gpu, other };
const char* device_type_name(DeviceType t);

struct DeviceInfo {
  std::string backend;  // "cpu", "vulkan", "cuda"
  int index = 0;
  std::string name;  // human-readable, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  DeviceType type = DeviceType::cpu;
  uint64_t memory_bytes = 0;
  std::vector<std::pair<std::string, std::string>> properties;  // backend extras
  // The device string: "cpu", "vulkan:0", "cuda:1".
  std::string str() const;
};

class BackendDevice;

// A compute device: a handle users pass around (as torch::Device). Every
// Device is a BackendDevice (switchyard/backend/device.h), the only class
// that may derive from it.
class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  std::string str() const { return info_.str(); }
  // Runs what is pending on this device (queued optimizer updates included)
  // and waits until it has finished; the same as switchyard::synchronize(d).
  void synchronize();

 private:
  friend class BackendDevice;
  explicit Device(DeviceInfo info) : info_(std::move(info)) {}
  DeviceInfo info_;
};

// What this build knows of a backend, available or not.
struct BackendEntry {
  std::string name;
  bool available = false;
  std::string reason;  // why not available; with devices, those left out and why
  std::vector<std::shared_ptr<Device>> devices;
};

// Every backend known to this build, available or not, with its devices.
const std::vector<BackendEntry>& backends();
// Every usable device, in selection order.
std::vector<Device*> devices();
// Resolve a device string: cpu, vulkan, vulkan:1, cuda, cuda:0, auto.
// Throws Error listing what is available when the name is unknown or absent.
Device& device(std::string_view name);
// SWITCHYARD_DEVICE if set, else "auto".
Device& default_device();
Device& cpu();

// Per backend, as torch.cuda.is_available(): whether it has a usable device
// here (built in, driver present, at least one device), and how many.
namespace cuda {
bool is_available();
int device_count();
}  // namespace cuda
namespace vulkan {
bool is_available();
int device_count();
}  // namespace vulkan

}  // namespace switchyard
