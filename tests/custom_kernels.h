// SPDX-License-Identifier: MIT
// Custom kernels the tests launch (besides samples/bias_silu.h): two
// outputs of different dtypes with float parameters, and a reduction
// through shared memory. Each in GLSL, CUDA and for the CPU; test_cuda
// compiles the CUDA sources with NVRTC.
#pragma once
#include <cstdint>

#include "switchyard/switchyard.h"

namespace test_kernels {

namespace sy = switchyard;

// y = alpha * x + beta (f32) and s = sign(x) (i32), n elements.
struct ScaleSignParams {
  float alpha;
  float beta;
  uint32_t n;
};

inline constexpr const char* kScaleSignGlsl = R"(
struct Params { float alpha; float beta; uint n; };
SY_PARAMS(Params)
SY_OUTPUT(0, float, y)
SY_OUTPUT(1, int, s)
SY_INPUT(2, float, x)
void main() {
  for (uint i = gl_GlobalInvocationID.x; i < params.n; i += gl_NumWorkGroups.x * SY_WG_X) {
    float v = x[i];
    y[i] = params.alpha * v + params.beta;
    s[i] = v > 0.0 ? 1 : (v < 0.0 ? -1 : 0);
  }
}
)";

inline constexpr const char* kScaleSignCuda = R"(
struct Params { float alpha; float beta; unsigned n; };
extern "C" __global__ void scale_sign(float* y, int* s, const float* x, Params p) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    float v = x[i];
    y[i] = p.alpha * v + p.beta;
    s[i] = v > 0.f ? 1 : (v < 0.f ? -1 : 0);
  }
}
)";

inline const sy::CustomKernel& scale_sign() {
  static const sy::CustomKernel k({
      .name = "scale_sign",
      .glsl = kScaleSignGlsl,
      .cuda = kScaleSignCuda,
      .cpu =
          [](const sy::CpuKernelArgs& a) {
            const auto& p = *static_cast<const ScaleSignParams*>(a.params);
            auto* y = static_cast<float*>(a.outputs[0]);
            auto* s = static_cast<int32_t*>(a.outputs[1]);
            const auto* x = static_cast<const float*>(a.inputs[0]);
            for (uint32_t i = 0; i < p.n; ++i) {
              y[i] = p.alpha * x[i] + p.beta;
              s[i] = x[i] > 0 ? 1 : x[i] < 0 ? -1 : 0;
            }
          },
      .inputs = {{"x"}},
      .outputs = {{"y"}, {"s", sy::DType::i32}},
      .workgroup = {64, 1, 1},
      .params_bytes = sizeof(ScaleSignParams),
      .grid_stride = true,
  });
  return k;
}

// out[r] = sum of row r of x (rows, cols): a workgroup per row (grid-stride
// over rows), the row's partial sums added in a shared-memory tree.
struct RowSumParams {
  uint32_t rows;
  uint32_t cols;
};

inline constexpr const char* kRowSumGlsl = R"(
struct Params { uint rows; uint cols; };
SY_PARAMS(Params)
SY_OUTPUT(0, float, out_)
SY_INPUT(1, float, x)
shared float part[SY_WG_X];
void main() {
  uint t = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < params.rows; r += gl_NumWorkGroups.x) {
    float s = 0.0;
    for (uint c = t; c < params.cols; c += SY_WG_X) s += x[r * params.cols + c];
    part[t] = s;
    barrier();
    for (uint w = SY_WG_X / 2u; w > 0u; w >>= 1u) {
      if (t < w) part[t] += part[t + w];
      barrier();
    }
    if (t == 0u) out_[r] = part[0];
    barrier();  // part is reused by the next row
  }
}
)";

inline constexpr const char* kRowSumCuda = R"(
struct Params { unsigned rows; unsigned cols; };
extern "C" __global__ void row_sum(float* out, const float* x, Params p) {
  __shared__ float part[SY_WG_X];
  unsigned t = threadIdx.x;
  for (unsigned r = blockIdx.x; r < p.rows; r += gridDim.x) {
    float s = 0.f;
    for (unsigned c = t; c < p.cols; c += SY_WG_X) s += x[(size_t)r * p.cols + c];
    part[t] = s;
    __syncthreads();
    for (unsigned w = SY_WG_X / 2; w > 0; w >>= 1) {
      if (t < w) part[t] += part[t + w];
      __syncthreads();
    }
    if (t == 0) out[r] = part[0];
    __syncthreads();
  }
}
)";

inline const sy::CustomKernel& row_sum() {
  static const sy::CustomKernel k({
      .name = "row_sum",
      .glsl = kRowSumGlsl,
      .cuda = kRowSumCuda,
      .cpu =
          [](const sy::CpuKernelArgs& a) {
            const auto& p = *static_cast<const RowSumParams*>(a.params);
            auto* out = static_cast<float*>(a.outputs[0]);
            const auto* x = static_cast<const float*>(a.inputs[0]);
            for (uint32_t r = 0; r < p.rows; ++r) {
              float s = 0;
              for (uint32_t c = 0; c < p.cols; ++c) s += x[size_t(r) * p.cols + c];
              out[r] = s;
            }
          },
      .inputs = {{"x"}},
      .outputs = {{"out", sy::DType::f32,
                   [](const std::vector<sy::Shape>& in) { return sy::Shape{in[0][0]}; }}},
      .workgroup = {64, 1, 1},
      .params_bytes = sizeof(RowSumParams),
      .grid = [](const std::vector<sy::Shape>& in,
                 const std::vector<sy::Shape>&) { return sy::Grid::cover(in[0][0], 1); },
      .grid_stride = true,  // over rows
  });
  return k;
}

// Two f32 outputs with a backward: y = 2x and q = x^2 (n elements, no
// parameters: n is the binding's length, a multiple of 4 in the tests).
// Its backward gets each output's gradient separately (the other
// undefined) and autograd adds the two results.
inline constexpr const char* kDoubleSquareGlsl = R"(
SY_OUTPUT(0, float, y)
SY_OUTPUT(1, float, q)
SY_INPUT(2, float, x)
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < uint(x.length())) {
    y[i] = 2.0 * x[i];
    q[i] = x[i] * x[i];
  }
}
)";

inline constexpr const char* kDoubleSquareCuda = R"(
extern "C" __global__ void double_square(float* y, float* q, const float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  // n: the launch covers exactly the element count (a multiple of the block).
  y[i] = 2.f * x[i];
  q[i] = x[i] * x[i];
}
)";

inline const sy::CustomKernel& double_square() {
  static const sy::CustomKernel k({
      .name = "double_square",
      .glsl = kDoubleSquareGlsl,
      .cuda = kDoubleSquareCuda,
      .cpu =
          [](const sy::CpuKernelArgs& a) {
            auto* y = static_cast<float*>(a.outputs[0]);
            auto* q = static_cast<float*>(a.outputs[1]);
            const auto* x = static_cast<const float*>(a.inputs[0]);
            for (size_t i = 0; i < a.input_bytes[0] / sizeof(float); ++i) {
              y[i] = 2.f * x[i];
              q[i] = x[i] * x[i];
            }
          },
      .inputs = {{"x"}},
      .outputs = {{"y"}, {"q"}},
      .workgroup = {4, 1, 1},
      .backward =
          [](const sy::CustomBackwardArgs& a) {
            const sy::Tensor& x = a.inputs[0];
            sy::Tensor g = sy::zeros_like(x);
            if (a.grad_outputs[0].defined()) g = sy::add(g, sy::mul(a.grad_outputs[0], 2.f));
            if (a.grad_outputs[1].defined())
              g = sy::add(g, sy::mul(sy::mul(a.grad_outputs[1], x), 2.f));
            return std::vector<sy::Tensor>{g};
          },
  });
  return k;
}

}  // namespace test_kernels
