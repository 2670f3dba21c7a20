// SPDX-License-Identifier: MIT
// "cudaemu:0": the CUDA backend's own device class (CudaDevice: allocator,
// staging ring, graph capture and replay, status words, cuBLASLt GEMM
// mapping) and kernels, compiled against the emulated CUDA runtime and cuBLAS
// of this folder, so that all of it runs in CI where no GPU is. Compiled with
// -Dcuda_impl=cuda_emu_impl, so nothing collides with the real backend
// linked into the same program.
#include "emu_device.h"

#include <cstdlib>

#include "cuda_device.h"
#include "cudart_emu.h"

namespace switchyard::cuda_impl {

// The real backend tears its devices down before the CUDA runtime's exit
// handlers; the emulation has none, and the device's destructor suffices.
void register_exit_teardown() {}

Device& emulated_cuda_device() {
  static Device* d = [] {
    sy_emu::memory_limit = size_t(512) << 20;
    DeviceInfo info;
    info.backend = "cudaemu";
    info.name = "CudaDevice on the CPU emulation of CUDA (tests/cuda_emu)";
    info.type = DeviceType::other;
    info.memory_bytes = sy_emu::memory_limit;
    // An H100's compute capability unless SY_EMU_COMPUTE_CAPABILITY says
    // another (what bf16 GEMMs and TF32 are chosen by: cuda_device.h).
    const char* cc = std::getenv("SY_EMU_COMPUTE_CAPABILITY");
    info.properties = {{"memory", "staging ring (emulated)"},
                       {"compute_capability", cc && *cc ? cc : "9.0"}};
    for (auto& kv : conv_properties()) info.properties.push_back(kv);  // as a real device's
    // Two blocks per grid-stride launch: every loop goes round, and the
    // emulation (blocks one after another) stays quick.
    register_backend({"cudaemu", true, "", {std::make_shared<CudaDevice>(std::move(info), 0, 2)}});
    return &device("cudaemu:0");
  }();
  return *d;
}

}  // namespace switchyard::cuda_impl
