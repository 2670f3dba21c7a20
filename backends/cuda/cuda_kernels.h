// SPDX-License-Identifier: MIT
// Host-side entry points of the CUDA kernels (the .cu files), one per op of
// the kernel table (switchyard/backend/kernels.h documents each kernel's
// arguments and params). Each
// enqueues its kernel(s) on env.stream and checks the launch; none
// synchronizes, allocates or reads device memory from the host, so all of
// them can be captured into a CUDA graph.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

#include "switchyard/backend/kernels.h"

namespace switchyard {
struct Instr;  // switchyard/backend/program.h
}

namespace switchyard::cuda_impl {

// Status words the kernels write when they find bad input (a label outside
// [0, classes)); in device memory, copied back and cleared by synchronize().
struct DeviceStatus {
  int32_t code;    // 0: fine; 1: a label or index out of range
  int32_t kernel;  // Kernel id that reported it
  int32_t row;
  int32_t value;  // the offending label or index
  int32_t bound;  // the number of classes or of embeddings
};

// The GEMM, which is cuBLAS's: the device's Blas (under tests/cuda_emu, the
// emulated cuBLAS), reached from launch(GemmParams) through LaunchEnv::gemm.
struct LaunchEnv;
// A and B are f32, bf16 or f16 (GemmParams::ab_dtype); C and the bias f32.
using GemmFn = std::function<void(const GemmParams& p, float* C, const void* A, const void* B,
                                  const float* bias, const LaunchEnv& env)>;

// A custom kernel's launch (switchyard/custom.h), which the device makes:
// it holds the loaded entries (cuda_custom.h).
using CustomLaunchFn =
    std::function<void(const CustomParams& p, void* const* args, const LaunchEnv& env)>;

// A convolution of the table through cuDNN (cuda_dnn.h), reached from
// dispatch(); false: not taken, the own kernel runs.
using ConvFn = std::function<bool(const Instr& ins, void* const* args, const LaunchEnv& env)>;

struct LaunchEnv {
  cudaStream_t stream = nullptr;
  DeviceStatus* status = nullptr;  // device address of the status words
  int64_t max_blocks = 1024;       // grid cap for grid-stride loops (SMs x 32)
  const GemmFn* gemm = nullptr;    // the device's cuBLAS GEMM
  // f32 GEMMs and convolutions may use TF32 in this run: the device has it
  // (compute capability 8.0 and up) and set_float32_matmul_precision allows
  // it. Part of a CUDA graph's key.
  bool tf32 = false;
  const CustomLaunchFn* custom = nullptr;  // the device's custom kernels
  // The device's cuDNN convolutions, or null: the own kernels (k_conv.cu).
  // Returns false for a shape it leaves to them.
  const ConvFn* conv = nullptr;
  // Device memory for a kernel's partial results between its passes (split
  // reductions). One stream runs everything in order, so every launch may
  // use all of it.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  // A kRandomStream launch's Philox offset in device memory (a graph's: the
  // host writes it before each replay), or null: its params' offset.
  const uint64_t* rng_offset = nullptr;
  // A kLearningRate launch's learning rate in device memory (a graph's), or
  // null: its params' lr.
  const float* lr = nullptr;
};

// One launch(params, args, env) per kernel of the table, overloaded on the
// params struct; args[j] is argument j's device address. cuda_dispatch.cpp
// calls them from a switch generated from the table, so a kernel without its
// launch() is a link error. gemm's is in cuda_dispatch.cpp (it calls the
// device's cuBLAS through env.gemm).
// A multi-tensor kernel's (kMultiTensor) args are its N arguments' addresses
// followed by their element counts (N words of uintptr_t).
#define SY_CUDA_LAUNCH_DECL(kernel, Params, ...) \
  void launch(const Params& p, void* const* args, const LaunchEnv& env);
SWITCHYARD_KERNELS(SY_CUDA_LAUNCH_DECL)
#undef SY_CUDA_LAUNCH_DECL

// out[r, c] = act(out[r, c] + bias[c]) (bias may be null): the GEMM epilogue
// when cuBLASLt's own does not fit.
void launch_bias_act(int64_t rows, int64_t cols, float* out, const float* bias, Unary act,
                     const LaunchEnv& env);
// The same over `batch` products, product b at out + b * stride; the bias is
// bias[c], or bias[b * rows + r] when bias_rows (gemm's bias_rows).
void launch_bias_act_batched(int64_t batch, int64_t rows, int64_t cols, int64_t stride, float* out,
                             const float* bias, bool bias_rows, Unary act, const LaunchEnv& env);
// out[n, c, i] = act(out[n, c, i] + bias[c]) over (batch, channels, plane)
// NCHW (bias may be null): a convolution's epilogue after cuDNN.
void launch_channel_bias_act(int64_t batch, int64_t channels, int64_t plane, float* out,
                             const float* bias, Unary act, const LaunchEnv& env);

}  // namespace switchyard::cuda_impl
