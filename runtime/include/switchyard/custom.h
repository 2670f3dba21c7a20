// SPDX-License-Identifier: MIT
// Custom kernels: when the built-in ops are not enough, write the kernel
// yourself, once per backend you care about, and launch it on tensors like
// any op.
//
// - GLSL compute source for Vulkan, compiled at run time with libshaderc
//   (for the device's Vulkan version, optimized, validated by SPIRV-Tools);
// - CUDA C++ source with an `extern "C" __global__` entry for CUDA, compiled
//   at run time with NVRTC for the device's architecture (no nvcc needed);
// - a C++ callable for the CPU.
//
// Compiled code is cached in memory and on disk, keyed by a hash of the
// source, the options and the compiler's version. A launch builds a graph
// node like any op: it joins the step's single submission, and its hazards
// come from the declared outputs (written) and inputs (read). Attach a
// backward to make it differentiable; gradcheck() tests it. See
// docs/custom-kernels.md for bindings, parameters, workgroup sizes and
// debugging.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "switchyard/device.h"
#include "switchyard/dtype.h"
#include "switchyard/tensor.h"

namespace switchyard {

// Bytes of scalar parameters a custom kernel may take.
constexpr size_t kCustomParamBytes = 64;
// Tensor arguments (outputs and inputs together) a custom kernel may take.
constexpr size_t kCustomMaxArgs = 5;

// Workgroups (CUDA: blocks) per dimension of a launch.
struct Grid {
  uint32_t x = 1, y = 1, z = 1;
  // Enough workgroups of `size` invocations to cover `items` (at least one),
  // capped at `cap` (65535, the least every Vulkan device takes): past the
  // cap, each invocation loops over several items (a grid-stride loop).
  static Grid cover(int64_t items, uint32_t size, uint32_t cap = 65535);
};

// What the CPU callable is given: one pointer per output (written), then
// per input (read), each to the argument's first element, its size in
// bytes, and the scalar parameters.
struct CpuKernelArgs {
  std::span<void* const> outputs;
  std::span<const void* const> inputs;
  std::span<const size_t> output_bytes, input_bytes;
  const void* params = nullptr;  // the struct given to the launch (null without one)
};

// What a backward is given: the forward's inputs and outputs (no history),
// its parameters, and the gradient of each output (undefined for an output
// whose gradient does not flow: read it as zeros).
struct CustomBackwardArgs {
  std::vector<Tensor> inputs, outputs, grad_outputs;
  std::vector<unsigned char> params;
  // The parameters as the struct the launch was given.
  template <class P>
  P params_as() const;
};

struct CustomArg {
  std::string name{};
  DType dtype = DType::f32;
  // Outputs: the shape from the inputs' shapes; unset, input 0's shape.
  std::function<Shape(const std::vector<Shape>& inputs)> shape{};
};

struct KernelSpec {
  std::string name{};  // names the kernel in messages, debug labels and cache files
  // Vulkan: the body of a GLSL compute shader. Switchyard puts `#version 450`,
  // the workgroup size and the SY_* macros (SY_INPUT, SY_OUTPUT, SY_PARAMS)
  // in front of it; argument i is binding i, outputs first.
  std::string glsl{};
  // CUDA: C++ with `extern "C" __global__ void <cuda_entry>(outputs...,
  // inputs..., Params)` (the parameter struct last, when the kernel has one).
  std::string cuda{};
  std::string cuda_entry{};  // default: `name`
  std::function<void(const CpuKernelArgs&)> cpu{};
  std::vector<CustomArg> inputs{}, outputs{};
  // Invocations per workgroup (CUDA: threads per block), x * y * z.
  std::array<uint32_t, 3> workgroup = {256, 1, 1};
  size_t params_bytes = 0;  // the size of the parameter struct; 0: none
  // Workgroups per dimension from the inputs' and outputs' shapes; unset, one
  // workgroup per workgroup[0] elements of output 0 (Grid::cover).
  std::function<Grid(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs)> grid{};
  // The kernel covers any grid along x with a grid-stride loop (as the
  // samples' do): the device may then launch fewer workgroups along x than
  // the grid asks, as many as fill it (as the built-in kernels are launched:
  // on Vulkan 4096 on a CPU driver, 16384 on a GPU; on CUDA 32 per SM).
  bool grid_stride = false;
  // The gradient of each input (undefined: none), written with ops or with
  // other custom kernels, as torch.autograd.Function's backward. Unset: the
  // kernel is not differentiable (backward() through it says so).
  std::function<std::vector<Tensor>(const CustomBackwardArgs&)> backward{};
};

// A registered custom kernel. Copies share it; it lives for the process.
class CustomKernel {
 public:
  // Checks the spec (names, argument counts, sizes) and registers it.
  explicit CustomKernel(KernelSpec spec);

  // Launches on `inputs` (all on one device, of the declared dtypes),
  // returning the outputs. The kernel is compiled for the device at its
  // first launch there (or by compile()); a compile error is an exception
  // with the compiler's messages, at lines of your source.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const {
    return launch(inputs, nullptr, 0);
  }
  template <class P>
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, const P& params) const {
    static_assert(std::is_trivially_copyable_v<P>, "kernel parameters must be trivially copyable");
    static_assert(sizeof(P) <= kCustomParamBytes, "kernel parameters are at most 64 bytes");
    return launch(inputs, &params, sizeof(P));
  }
  std::vector<Tensor> launch(const std::vector<Tensor>& inputs, const void* params,
                             size_t bytes) const;

  // Compiles (or loads from the caches) the kernel for `device` now.
  void compile(Device& device) const;
  // Whether the kernel has code for `device`'s backend (GLSL for vulkan,
  // CUDA for cuda, a callable for cpu).
  bool has_code_for(const Device& device) const;
  const KernelSpec& spec() const;
  int64_t id() const { return id_; }

 private:
  int64_t id_ = -1;
};

// Why custom kernels cannot be compiled for `device` ("" when they can):
// its backend's compiler is missing (this build has no libshaderc, NVRTC
// cannot be opened) or the backend takes none. A kernel with code for the
// device still fails to compile with the compiler's own messages.
std::string custom_kernels_unavailable(Device& device);

// Compilation counters of this process (all devices): what a cache saved.
struct CustomKernelStats {
  uint64_t compiles = 0;         // sources compiled (shaderc, NVRTC)
  uint64_t memory_hits = 0;      // compiled code found in this process's cache
  uint64_t disk_hits = 0;        // compiled code read from the disk cache
  uint64_t disk_writes = 0;      // entries written to the disk cache
  uint64_t corrupt_entries = 0;  // disk entries that failed their checks (then recompiled)
  double compile_seconds = 0;    // spent in the compilers
};
CustomKernelStats custom_kernel_stats();
// The disk cache's directory: SWITCHYARD_KERNEL_CACHE, else
// $XDG_CACHE_HOME (or ~/.cache)/switchyard/kernels; "" when none (then only
// the in-memory cache is used). SWITCHYARD_KERNEL_CACHE=off turns it off.
std::string custom_kernel_cache_dir();

// Finite-difference gradient check, as the project's own gradient tests do:
// for a random projection v of f's output, compares the gradient backward()
// gives for each input that requires grad with central differences of
// sum(f(x) * v) (step eps, in double on the host). ok when every element
// has |analytic - numeric| <= atol + rtol * |numeric|.
struct GradcheckOptions {
  double eps = 1e-3;
  double atol = 1e-3;
  double rtol = 1e-2;
  uint64_t seed = 0;
};
struct GradcheckResult {
  bool ok = false;
  double max_abs_error = 0;
  std::string report;  // the worst element of each input
};
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

template <class P>
P CustomBackwardArgs::params_as() const {
  static_assert(std::is_trivially_copyable_v<P>, "kernel parameters must be trivially copyable");
  P p{};
  if (!params.empty()) std::memcpy(&p, params.data(), std::min(sizeof(P), params.size()));
  return p;
}

}  // namespace switchyard
