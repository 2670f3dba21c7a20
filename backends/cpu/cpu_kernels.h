// CPU kernel functions, one per entry of the kernel table.
#pragma once
#include "switchyard/kernels.h"

namespace switchyard::cpu_impl {

// C (M,N) = alpha * op(A) op(B) (+ bias) with row-major storage.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          const float* B, const float* bias, float* C);
const char* gemm_library();

// Runs one kernel; `p[i]` points at argument i.
void run_kernel(Kernel k, const KernelParams& prm, void* const* p);

float unary_apply(Unary op, float x);

}  // namespace switchyard::cpu_impl
