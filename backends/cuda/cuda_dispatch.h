// SPDX-License-Identifier: MIT
// Kernel table -> CUDA launch: a switch generated from the kernel table
// calls the launch() overload of each kernel's params (cuda_kernels.h), so a
// kernel added to the table without its launch() fails to link.
#pragma once
#include <functional>

#include "cuda_kernels.h"
#include "switchyard/backend/program.h"

namespace switchyard::cuda_impl {

// Enqueues one launch. ptrs[j] is argument j's device address (binding base
// + offsets), nullptr past ins.nargs. The GEMM goes through env.gemm.
void dispatch(const Instr& ins, void* const* ptrs, const LaunchEnv& env);

}  // namespace switchyard::cuda_impl
