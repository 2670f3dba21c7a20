// SPDX-License-Identifier: MIT
// The pointwise math of the kernel table's Unary and Binary codes, written
// once for the CPU backend and for the CUDA kernels (which see it as
// __host__ __device__ functions), so the two cannot drift apart. The Vulkan
// shaders restate it in GLSL (shaders/common.glsl). C++17, float only.
#pragma once
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "switchyard/backend/kernels.h"

#if defined(__CUDACC__)
#define SY_HOST_DEVICE __host__ __device__ inline
#else
#define SY_HOST_DEVICE inline
#endif

// SY_POINTWISE_ABI names an inline namespace, so a build that compiles this
// header with other floating-point flags (the CUDA emulation's contracted
// kernels) has its own copies instead of sharing the CPU backend's.
#ifndef SY_POINTWISE_ABI
#define SY_POINTWISE_ABI v1
#endif

namespace switchyard::pointwise {
inline namespace SY_POINTWISE_ABI {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi); GELU is the tanh form

SY_HOST_DEVICE float unary(Unary op, float x) {
  switch (op) {
    case Unary::relu:
      return x > 0.f ? x : 0.f;
    case Unary::gelu:
      return 0.5f * x * (1.f + tanhf(kGeluC * (x + 0.044715f * x * x * x)));
    case Unary::tanh:
      return tanhf(x);
    case Unary::sigmoid:
      return 1.f / (1.f + expf(-x));
    case Unary::exp:
      return expf(x);
    case Unary::log:
      return logf(x);
    case Unary::sqrt:
      return sqrtf(x);
    case Unary::square:
      return x * x;
    case Unary::abs:
      return fabsf(x);
    case Unary::none:
      return x;
  }
  return x;
}

// d op(x) / dx, given x and y = op(x).
SY_HOST_DEVICE float unary_grad(Unary op, float x, float y) {
  switch (op) {
    case Unary::relu:
      return x > 0.f ? 1.f : 0.f;
    case Unary::gelu: {
      float t = tanhf(kGeluC * (x + 0.044715f * x * x * x));
      return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluC * (1.f + 3.f * 0.044715f * x * x);
    }
    case Unary::tanh:
      return 1.f - y * y;
    case Unary::sigmoid:
      return y * (1.f - y);
    case Unary::exp:
      return y;
    case Unary::log:
      return 1.f / x;
    case Unary::sqrt:
      return 0.5f / y;
    case Unary::square:
      return 2.f * x;
    case Unary::abs:
      return x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f);
    case Unary::none:
      return 1.f;
  }
  return 0.f;
}

SY_HOST_DEVICE float binary(Binary op, float a, float b) {
  switch (op) {
    case Binary::add:
      return a + b;
    case Binary::sub:
      return a - b;
    case Binary::mul:
      return a * b;
    case Binary::div:
      return a / b;
    case Binary::eq:
      return a == b ? 1.f : 0.f;
    case Binary::ne:
      return a != b ? 1.f : 0.f;
    case Binary::lt:
      return a < b ? 1.f : 0.f;
    case Binary::le:
      return a <= b ? 1.f : 0.f;
    case Binary::gt:
      return a > b ? 1.f : 0.f;
    case Binary::ge:
      return a >= b ? 1.f : 0.f;
  }
  return 0.f;
}

// Element conversion for cast, fill and arange (CPU and CUDA; the Vulkan
// shaders restate it in common.glsl): C++'s conversions, except that i64 ->
// i32 and f32 -> i64 saturate at the target's limits.
template <class To, class From>
SY_HOST_DEVICE To convert(From v) {
  if constexpr (std::is_same_v<To, int32_t> && std::is_same_v<From, int64_t>) {
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : int32_t(v);
  } else if constexpr (std::is_same_v<To, int64_t> && std::is_same_v<From, float>) {
    constexpr float kLimit = 9.2233720368547758e18f;  // 2^63
    return v >= kLimit ? INT64_MAX : v <= -kLimit ? INT64_MIN : int64_t(v);
  } else {
    return To(v);
  }
}

// One SGD step for one parameter, without and with momentum (`first`: the
// buffer starts as the gradient).
SY_HOST_DEVICE void sgd_step(float& w, float g, float lr, float wd) { w -= lr * (g + wd * w); }

SY_HOST_DEVICE void sgd_momentum_step(float& w, float& buf, float g, float lr, float mom,
                                      float damp, float wd, bool nesterov, bool first) {
  float d = g + wd * w;
  float b = first ? d : mom * buf + (1.f - damp) * d;
  buf = b;
  w -= lr * (nesterov ? d + mom * b : b);
}

// One Adam/AdamW step for one parameter; `keep` scales the weight (AdamW's
// decoupled decay), `l2` adds wd*w to the gradient (Adam's). `step` is
// lr / (1 - beta1^t), `inv_sqrt_bc2` is 1 / sqrt(1 - beta2^t).
SY_HOST_DEVICE void adam_step(float& w, float& m, float& v, float g, float b1, float b2, float eps,
                              float step, float inv_sqrt_bc2, float keep, float l2) {
  float wj = w * keep;
  float d = g + l2 * wj;
  float mj = b1 * m + (1.f - b1) * d;
  float vj = b2 * v + (1.f - b2) * d * d;
  m = mj;
  v = vj;
  w = wj - step * mj / (sqrtf(vj) * inv_sqrt_bc2 + eps);
}

}  // namespace SY_POINTWISE_ABI
}  // namespace switchyard::pointwise
