// SPDX-License-Identifier: MIT
// Custom kernels on CUDA (switchyard/custom.h): the user's CUDA C++
// compiled at run time by NVRTC (opened with dlopen: no nvcc, and no NVRTC
// needed to start) for the device's architecture, cached by the runtime's
// compile cache, loaded with the driver API (cuModuleLoadData, reached
// through cudaGetDriverEntryPointByVersion, so nothing links libcuda) and
// launched with cuLaunchKernel, which CUDA graphs capture like any launch.
//
// cuda_custom.cpp is built into the real backend only; the CUDA emulation
// (tests/cuda_emu) runs without it: g_custom_cuda is null there.
#pragma once
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "switchyard/backend/kernels.h"

namespace switchyard {
struct KernelSpec;
}

namespace switchyard::cuda_impl {

class CustomCuda {
 public:
  virtual ~CustomCuda() = default;
  // The kernel's entry, compiled for compute capability major.minor and
  // loaded into the current context (the device's primary context: the
  // caller made it current). Throws the compiler's errors, and says why
  // when NVRTC or the driver cannot be reached.
  virtual void* load(const KernelSpec& spec, int major, int minor) = 0;
  // Why kernels cannot be compiled or loaded ("" when they can).
  virtual std::string unavailable_reason() const = 0;
  // Enqueues the entry `fn` on `stream`: args[0..nargs) are the arguments'
  // device addresses (outputs, then inputs), then the parameter struct.
  virtual void launch(void* fn, const KernelSpec& spec, const CustomParams& p, void* const* args,
                      int nargs, cudaStream_t stream) = 0;
};
// Set when the real backend is probed (cuda_backend.cpp); null under the emulation.
extern CustomCuda* g_custom_cuda;
CustomCuda* make_custom_cuda();

// What Switchyard puts in front of the user's CUDA source: SY_WG_X/Y/Z
// and a #line directive, so NVRTC's messages name lines of the user's file.
std::string cuda_prelude(const KernelSpec& spec);
// PTX of the kernel for virtual architecture compute_<arch> (e.g. 90), from
// the compile cache or NVRTC: needs no GPU (tests compile the sample's
// source for the architectures this build targets).
std::string nvrtc_ptx(const KernelSpec& spec, int arch);
// The same as PTX (compute_<arch>) or as a cubin (sm_<arch>, an ELF image).
std::string nvrtc_compile(const KernelSpec& spec, int arch, bool cubin);
// Empty when NVRTC can be opened, else why not.
std::string nvrtc_unavailable_reason();
// The architectures NVRTC compiles for (nvrtcGetSupportedArchs; e.g. 75..120).
std::vector<int> nvrtc_architectures();

// What a device of compute capability major.minor loads: a cubin for
// sm_<arch> when NVRTC knows the architecture (and writes cubins), else PTX
// for the newest architecture it knows below; arch 0 when there is none.
struct CudaTarget {
  int arch = 0;
  bool cubin = false;
};
CudaTarget choose_cuda_target(const std::vector<int>& known, bool cubins, int major, int minor);
// The byte sizes of `entry`'s parameters as its PTX declares them (empty
// when the PTX has no such entry).
std::vector<size_t> ptx_param_sizes(const std::string& ptx, const std::string& entry);
// Throws Error unless `sizes` (the entry's parameters) are one pointer per
// argument, outputs then inputs, then the parameter struct of params_bytes.
void check_cuda_params(const KernelSpec& spec, const std::vector<size_t>& sizes);

}  // namespace switchyard::cuda_impl
