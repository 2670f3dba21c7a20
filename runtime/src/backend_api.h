// SPDX-License-Identifier: MIT
// Internal: how the runtime finds backends. The CPU backend is always built
// in; the GPU backends are the list SWITCHYARD_GPU_BACKENDS in the root
// CMakeLists.txt, from which the build generates gpu_backends(). Each built
// backend provides `BackendEntry <name>_backend()`; plugins and test doubles
// join at run time with register_backend().
#pragma once
#include <span>

#include "switchyard/backend/device.h"

namespace switchyard::detail {

BackendEntry cpu_backend();

// A GPU backend this build knows of, in the order `auto` prefers them and
// devices() lists them. `probe` is null when it was not built (`why` says
// why); a probe never throws: an absent driver or device is a reason.
struct GpuBackend {
  const char* name;
  BackendEntry (*probe)();
  const char* why;
};
std::span<const GpuBackend> gpu_backends();  // generated (backend_registry.cpp)

// A CPU device reporting another backend name and index (test doubles for
// mixed-device checks).
std::shared_ptr<Device> make_cpu_device(const std::string& backend, int index);

}  // namespace switchyard::detail
