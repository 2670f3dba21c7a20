// SPDX-License-Identifier: MIT
// See cuda_dispatch.h.
#include "cuda_dispatch.h"

#include "switchyard/error.h"

namespace switchyard::cuda_impl {

void launch(const GemmParams& p, void* const* a, const LaunchEnv& env) {
  SY_CHECK(env.gemm, "gemm", "expected a GEMM implementation on the CUDA device, found none");
  SY_CHECK(p.c_dtype == DType::f32, "gemm", "expected an f32 output on CUDA, found ",
           dtype_name(p.c_dtype), " (internal error: gemm_writes says f32 only)");
  (*env.gemm)(p, static_cast<float*>(a[0]), a[1], a[2],
              p.has_bias ? static_cast<const float*>(a[3]) : nullptr, env);
}

void launch(const CustomParams& p, void* const* a, const LaunchEnv& env) {
  SY_CHECK(env.custom, "custom", "expected custom kernels on the CUDA device, found none");
  (*env.custom)(p, a, env);
}

void dispatch(const Instr& ins, void* const* a, const LaunchEnv& env) {
  // Convolutions through cuDNN where the device has it (cuda_dnn.h).
  if (env.conv &&
      (ins.kernel == Kernel::conv2d || ins.kernel == Kernel::conv2d_backward_input ||
       ins.kernel == Kernel::conv2d_backward_weight) &&
      (*env.conv)(ins, a, env))
    return;
  switch (ins.kernel) {
#define SY_CUDA_CASE(kernel, Params, ...) \
  case Kernel::kernel:                    \
    return launch(ins.params.get<Params>(), a, env);
    SWITCHYARD_KERNELS(SY_CUDA_CASE)
#undef SY_CUDA_CASE
  }
  throw Error(detail::cat("[execute] unknown kernel id ", int(ins.kernel), " on CUDA"));
}

}  // namespace switchyard::cuda_impl
