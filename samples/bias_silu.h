// SPDX-License-Identifier: MIT
// A fused bias + SiLU (Swish) as a custom kernel: y = silu(x + b), with
// b broadcast over the rows of x (rows, features), silu(z) = z * sigmoid(z).
// One kernel instead of two launches and a round trip of z through memory.
// Written once per backend: GLSL (Vulkan), CUDA C++ (NVRTC) and a C++
// callable (CPU); its backward is a second custom kernel for dz, and the
// bias gradient is a built-in column sum of dz.
//
// Used by samples/05_custom_kernel.cpp, by the tests (tests/test_custom.cpp
// runs it on every device; test_cuda compiles its CUDA source with NVRTC for
// the architectures this build targets) and by `switchyard bench`.
#pragma once
#include <cmath>
#include <cstdint>

#include "switchyard/switchyard.h"

namespace bias_silu {

namespace sy = switchyard;

// The parameter struct, declared identically in each source below.
struct Params {
  uint32_t n;         // elements of x
  uint32_t features;  // columns (the bias's length)
};

// Vulkan. Argument i is binding i: outputs first, then inputs.
inline constexpr const char* kForwardGlsl = R"(
struct Params { uint n; uint features; };
SY_PARAMS(Params)
SY_OUTPUT(0, float, y)
SY_INPUT(1, float, x)
SY_INPUT(2, float, b)
void main() {
  // A grid-stride loop: any grid covers any n.
  for (uint i = gl_GlobalInvocationID.x; i < params.n; i += gl_NumWorkGroups.x * SY_WG_X) {
    float z = x[i] + b[i % params.features];
    y[i] = z / (1.0 + exp(-z));
  }
}
)";

// dz = dy * silu'(z), silu'(z) = s * (1 + z * (1 - s)), s = sigmoid(z).
inline constexpr const char* kBackwardGlsl = R"(
struct Params { uint n; uint features; };
SY_PARAMS(Params)
SY_OUTPUT(0, float, dz)
SY_INPUT(1, float, dy)
SY_INPUT(2, float, x)
SY_INPUT(3, float, b)
void main() {
  for (uint i = gl_GlobalInvocationID.x; i < params.n; i += gl_NumWorkGroups.x * SY_WG_X) {
    float z = x[i] + b[i % params.features];
    float s = 1.0 / (1.0 + exp(-z));
    dz[i] = dy[i] * s * (1.0 + z * (1.0 - s));
  }
}
)";

// CUDA: extern "C" entries named as the kernels; the parameter struct last.
inline constexpr const char* kForwardCuda = R"(
struct Params { unsigned n; unsigned features; };
extern "C" __global__ void bias_silu(float* y, const float* x, const float* b, Params p) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    float z = x[i] + b[i % p.features];
    y[i] = z / (1.0f + expf(-z));
  }
}
)";

inline constexpr const char* kBackwardCuda = R"(
struct Params { unsigned n; unsigned features; };
extern "C" __global__ void bias_silu_backward(float* dz, const float* dy, const float* x,
                                              const float* b, Params p) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    float z = x[i] + b[i % p.features];
    float s = 1.0f / (1.0f + expf(-z));
    dz[i] = dy[i] * s * (1.0f + z * (1.0f - s));
  }
}
)";

inline void forward_cpu(const sy::CpuKernelArgs& a) {
  const auto& p = *static_cast<const Params*>(a.params);
  float* y = static_cast<float*>(a.outputs[0]);
  const float* x = static_cast<const float*>(a.inputs[0]);
  const float* b = static_cast<const float*>(a.inputs[1]);
  for (uint32_t i = 0; i < p.n; ++i) {
    const float z = x[i] + b[i % p.features];
    y[i] = z / (1.f + std::exp(-z));
  }
}

inline void backward_cpu(const sy::CpuKernelArgs& a) {
  const auto& p = *static_cast<const Params*>(a.params);
  float* dz = static_cast<float*>(a.outputs[0]);
  const float* dy = static_cast<const float*>(a.inputs[0]);
  const float* x = static_cast<const float*>(a.inputs[1]);
  const float* b = static_cast<const float*>(a.inputs[2]);
  for (uint32_t i = 0; i < p.n; ++i) {
    const float z = x[i] + b[i % p.features];
    const float s = 1.f / (1.f + std::exp(-z));
    dz[i] = dy[i] * s * (1.f + z * (1.f - s));
  }
}

inline Params params_for(const sy::Tensor& x) {
  return {uint32_t(x.numel()), uint32_t(x.size(-1))};
}

inline const sy::CustomKernel& backward_kernel() {
  static const sy::CustomKernel k({
      .name = "bias_silu_backward",
      .glsl = kBackwardGlsl,
      .cuda = kBackwardCuda,
      .cpu = backward_cpu,
      .inputs = {{"dy"}, {"x"}, {"b"}},
      .outputs = {{"dz"}},
      .params_bytes = sizeof(Params),
      .grid_stride = true,
  });
  return k;
}

inline const sy::CustomKernel& forward_kernel() {
  static const sy::CustomKernel k({
      .name = "bias_silu",
      .glsl = kForwardGlsl,
      .cuda = kForwardCuda,
      .cpu = forward_cpu,
      .inputs = {{"x"}, {"b"}},
      .outputs = {{"y"}},
      .params_bytes = sizeof(Params),
      .grid_stride = true,
      // The gradient, as torch.autograd.Function's backward: dz by the
      // second kernel, db = dz summed over the rows (a built-in op).
      .backward =
          [](const sy::CustomBackwardArgs& a) {
            const sy::Tensor& x = a.inputs[0];
            const sy::Tensor& b = a.inputs[1];
            sy::Tensor dz = backward_kernel()({a.grad_outputs[0], x, b}, a.params_as<Params>())[0];
            return std::vector<sy::Tensor>{dz, sy::sum(dz.reshape({-1, b.numel()}), 0)};
          },
  });
  return k;
}

// y = silu(x + b) for x (..., features) and b (features).
inline sy::Tensor apply(const sy::Tensor& x, const sy::Tensor& b) {
  if (b.dim() != 1 || x.dim() < 1 || x.size(-1) != b.size(0))
    throw sy::Error("[bias_silu] expected x (..., F) and b (F), found " + sy::shape_str(x.shape()) +
                    " and " + sy::shape_str(b.shape()));
  return forward_kernel()({x, b}, params_for(x))[0];
}

// As a module with its own bias parameter (zeros), for Sequential models.
class BiasSiLU : public sy::nn::Module {
 public:
  explicit BiasSiLU(int64_t features)
      : bias_(&register_parameter("bias", sy::zeros({features}).requires_grad_())) {}
  sy::Tensor forward(const sy::Tensor& x) override { return apply(x, *bias_); }

 private:
  sy::Tensor* bias_;
};

}  // namespace bias_silu
