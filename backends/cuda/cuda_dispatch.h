// Kernel table -> CUDA launch: one switch over every kernel of kernels.h
// (compiled with -Werror=switch, so a kernel added to the table and not here
// fails the build).
#pragma once
#include <functional>

#include "cuda_kernels.h"
#include "switchyard/program.h"

namespace switchyard::cuda_impl {

// The GEMM, which is cuBLAS's: the device passes its own in (the CPU
// emulation of the kernels in tests/cuda_emu passes one that refuses).
using GemmFn = std::function<void(const KernelParams& p, float* C, const float* A, const float* B,
                                  const float* bias, const LaunchEnv& env)>;

// Enqueues one launch. ptrs[j] is argument j's device address (binding base
// + offsets), nullptr past ins.nargs.
void dispatch(const Instr& ins, void* const* ptrs, const GemmFn& gemm, const LaunchEnv& env);

}  // namespace switchyard::cuda_impl
