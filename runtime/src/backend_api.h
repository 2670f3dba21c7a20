// Internal: how the runtime finds backends. Each built-in backend provides a
// function returning its entry; GPU backends may also come as plugins.
#pragma once
#include "switchyard/device.h"

namespace switchyard::detail {
BackendEntry cpu_backend();
#ifdef SWITCHYARD_HAVE_VULKAN
// Enumerates Vulkan devices (never throws: an absent driver is a reason).
BackendEntry vulkan_backend();
#endif
#ifdef SWITCHYARD_HAVE_CUDA
// Enumerates CUDA devices (never throws: no driver or no GPU is a reason).
BackendEntry cuda_backend();
#endif
// A CPU device reporting another backend name and index (test doubles for
// mixed-device checks).
std::shared_ptr<Device> make_cpu_device(const std::string& backend, int index);
}  // namespace switchyard::detail
