// SPDX-License-Identifier: MIT
// CPU kernel functions, one per entry of the kernel table.
#pragma once
#include "switchyard/backend/kernels.h"

namespace switchyard::cpu_impl {

// C (M,N) = alpha * op(A) op(B) (+ bias) with row-major storage; lda and
// ldb are A's and B's row strides as stored (0: packed).
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, float alpha,
          const float* A, const float* B, const float* bias, float* C);
const char* gemm_library();

// Runs one kernel (the one `prm` was made for); `args[i]` points at argument i.
void run_kernel(const KernelParams& prm, void* const* args);
// A multi-tensor kernel (kMultiTensor): args[i] and bytes[i] for each of its
// Program::more_args.
void run_multi_kernel(const KernelParams& prm, void* const* args, const uint64_t* bytes);

float unary_apply(Unary op, float x);

}  // namespace switchyard::cpu_impl
