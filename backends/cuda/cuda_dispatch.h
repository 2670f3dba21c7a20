// Kernel table -> CUDA launch: one switch over every kernel of kernels.h
// (compiled with -Werror=switch, so a kernel added to the table and not here
// fails the build).
#pragma once
#include "cuda_blas.h"
#include "cuda_kernels.h"
#include "switchyard/program.h"

namespace switchyard::cuda_impl {

// Enqueues one launch. ptrs[j] is argument j's device address (binding base
// + offsets), nullptr past ins.nargs.
void dispatch(const Instr& ins, void* const* ptrs, Blas& blas, const LaunchEnv& env);

}  // namespace switchyard::cuda_impl
