// Host-side entry points of the CUDA kernels (the .cu files), one per op of
// the kernel table (kernels.h documents each op's arguments and params). Each
// enqueues its kernel(s) on env.stream and checks the launch; none
// synchronizes, allocates or reads device memory from the host, so all of
// them can be captured into a CUDA graph.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "switchyard/kernels.h"

namespace switchyard::cuda_impl {

// Status words the kernels write when they find bad input (a label outside
// [0, classes)); in device memory, copied back and cleared by synchronize().
struct DeviceStatus {
  int32_t code;    // 0: fine; 1: label out of range
  int32_t kernel;  // Kernel id that reported it
  int32_t row;
  int32_t value;   // the offending label
  int32_t bound;   // the number of classes
};

struct LaunchEnv {
  cudaStream_t stream = nullptr;
  DeviceStatus* status = nullptr;  // device address of the status words
  int64_t max_blocks = 1024;       // grid cap for grid-stride loops (SMs x 32)
};

void launch_fill(const KernelParams& p, void* out, const LaunchEnv& env);
void launch_arange(const KernelParams& p, void* out, const LaunchEnv& env);
void launch_rand(Kernel k, const KernelParams& p, float* out, const LaunchEnv& env);
void launch_cast(const KernelParams& p, void* out, const void* in, const LaunchEnv& env);
void launch_transpose(const KernelParams& p, void* out, const void* in, const LaunchEnv& env);
void launch_pad(const KernelParams& p, float* out, const float* in, const LaunchEnv& env);
void launch_expand(const KernelParams& p, float* out, const float* in, const LaunchEnv& env);
void launch_binary(const KernelParams& p, float* out, const float* a, const float* b, const LaunchEnv& env);
void launch_affine(const KernelParams& p, float* out, const float* in, const LaunchEnv& env);
void launch_unary(Unary op, int64_t n, float* out, const float* in, const LaunchEnv& env);
void launch_unary_backward(const KernelParams& p, float* dx, const float* dy, const float* x,
                           const float* y, const LaunchEnv& env);
// out[r, c] = act(out[r, c] + bias[c]) (bias may be null): the GEMM epilogue
// when cuBLASLt's own does not fit.
void launch_bias_act(int64_t rows, int64_t cols, float* out, const float* bias, Unary act,
                     const LaunchEnv& env);
void launch_reduce_sum(const KernelParams& p, float* out, const float* in, const LaunchEnv& env);
void launch_softmax(const KernelParams& p, float* out, const float* in, const LaunchEnv& env);
void launch_softmax_backward(const KernelParams& p, float* dx, const float* dy, const float* y,
                             const LaunchEnv& env);
void launch_cross_entropy(const KernelParams& p, float* loss, const float* x, const int32_t* labels,
                          const LaunchEnv& env);
void launch_cross_entropy_backward(const KernelParams& p, float* dx, const float* x,
                                   const int32_t* labels, const float* dloss, const LaunchEnv& env);
void launch_argmax(const KernelParams& p, int32_t* out, const float* x, const LaunchEnv& env);
void launch_sgd_update(const KernelParams& p, float* w, float* buf, const float* g, const LaunchEnv& env);
void launch_adam_update(const KernelParams& p, float* w, float* m, float* v, const float* g,
                        const float* step, const LaunchEnv& env);

}  // namespace switchyard::cuda_impl
