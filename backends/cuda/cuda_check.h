// SPDX-License-Identifier: MIT
// Error checking for the CUDA backend: every runtime call and every kernel
// launch goes through one of these, and a failure becomes a switchyard::Error
// naming the operation, the call and the API's error name and text.
#pragma once
#include <cuda_runtime_api.h>

#include "switchyard/error.h"

namespace switchyard::cuda_impl {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* op, const char* call) {
  // Read (and so clear) the thread's last error: a non-sticky failure would
  // otherwise be reported again by the next launch check. (Sticky errors,
  // a corrupted context, stay and fail every later call, as they should.)
  (void)cudaGetLastError();
  std::string msg = detail::cat("[", op, "] ", call, " failed: ", cudaGetErrorName(e), " (",
                                cudaGetErrorString(e), ")");
  if (e == cudaErrorMemoryAllocation) throw OutOfMemory(msg);
  switch (e) {  // sticky: the context is unusable, every later call fails the same way
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
      throw DeviceLost(msg + ": the device's context is lost; every later use of it throws");
    default:
      throw Error(msg);
  }
}

}  // namespace switchyard::cuda_impl

// SY_CUDA(op, call): runs a CUDA runtime call, throws on failure.
#define SY_CUDA(op, call)                                                            \
  do {                                                                               \
    cudaError_t sy_e_ = (call);                                                      \
    if (sy_e_ != cudaSuccess) ::switchyard::cuda_impl::throw_cuda(sy_e_, op, #call); \
  } while (0)

// SY_CUDA_LAUNCHED(name): after a <<<...>>> launch. Catches bad launch
// configurations at once; faults inside the kernel surface at the next
// synchronization, also as an exception.
#define SY_CUDA_LAUNCHED(name)                                                                   \
  do {                                                                                           \
    cudaError_t sy_e_ = cudaGetLastError();                                                      \
    if (sy_e_ != cudaSuccess) ::switchyard::cuda_impl::throw_cuda(sy_e_, name, "kernel launch"); \
  } while (0)
