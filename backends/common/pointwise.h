// SPDX-License-Identifier: MIT
// The pointwise math of the kernel table's Unary and Binary codes, written
// once for the CPU backend and for the CUDA kernels (which see it as
// __host__ __device__ functions), so the two cannot drift apart. The Vulkan
// shaders restate it in GLSL (shaders/common.glsl). C++17; arithmetic in float.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

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

SY_HOST_DEVICE uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

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
    case Unary::nonfinite:  // on the bits: immune to fast-math and flush modes
      return (float_bits(x) & 0x7f800000u) == 0x7f800000u ? 1.f : 0.f;
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
    case Unary::nonfinite:
      return 0.f;
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

// ---- 16-bit floats ----------------------------------------------------------
// bf16 and f16 elements as stored: 16-bit words. The conversions are written
// with integer operations, so they give the same bits on every compiler and
// device, whatever its float modes (flush-to-zero, F16C or not); the Vulkan
// shaders restate them in common.glsl. Widening is exact; narrowing rounds
// to nearest even, keeps NaN a (quiet) NaN, and f16 overflows to infinity
// at 65520 and above (the IEEE conversion, as PyTorch and CUDA's __float2half_rn).
struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};

SY_HOST_DEVICE float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

SY_HOST_DEVICE float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }
SY_HOST_DEVICE uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

SY_HOST_DEVICE float f16_to_float(uint16_t h) {
  const uint32_t s = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in f32
    const float v = float(m) * 5.9604644775390625e-8f;
    return bits_float(float_bits(v) | s);
  }
  if (e == 31) return bits_float(s | 0x7f800000u | (m << 13));  // infinity, NaN
  return bits_float(s | ((e + 112u) << 23) | (m << 13));
}
SY_HOST_DEVICE uint16_t float_to_f16(float f) {
  const uint32_t u = float_bits(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(s | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  if (a >= 0x477ff000u) return uint16_t(s | 0x7c00u);  // 65520 and up: infinity
  if (a >= 0x38800000u) {  // normal in f16: rebias the exponent, round the 13 dropped bits
    const uint32_t r = a - 0x38000000u;
    return uint16_t(s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  // Subnormal or zero: |f| * 2^24 rounded to an even integer (the scaling is
  // exact; 1024 is the smallest normal's encoding). f32 subnormals round to 0.
  if (a < 0x33000000u) return uint16_t(s);  // below half the smallest subnormal
  const float x = bits_float(a) * 16777216.f;
  uint32_t m = uint32_t(x);
  const float rest = x - float(m);
  if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
  return uint16_t(s | m);
}

// f32's view of any element type, and the element rounded from f32.
template <class T>
SY_HOST_DEVICE float widen(T v) {
  if constexpr (std::is_same_v<T, bf16_t>)
    return bf16_to_float(v.bits);
  else if constexpr (std::is_same_v<T, f16_t>)
    return f16_to_float(v.bits);
  else
    return float(v);
}

// Element conversion for cast, fill and arange (CPU and CUDA; the Vulkan
// shaders restate it in common.glsl): C++'s conversions, except that i64 ->
// i32 and f32 -> i64 saturate at the target's limits, and conversions to
// and from bf16/f16 go through f32 (an integer rounds to f32 first, as
// PyTorch's; a 16-bit float to an integer truncates its f32 value).
template <class To, class From>
SY_HOST_DEVICE To convert(From v) {
  if constexpr (std::is_same_v<From, bf16_t> || std::is_same_v<From, f16_t>) {
    return convert<To>(widen(v));
  } else if constexpr (std::is_same_v<To, bf16_t>) {
    return bf16_t{float_to_bf16(float(v))};
  } else if constexpr (std::is_same_v<To, f16_t>) {
    return f16_t{float_to_f16(float(v))};
  } else if constexpr (std::is_same_v<To, int32_t> && std::is_same_v<From, int64_t>) {
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : int32_t(v);
  } else if constexpr (std::is_same_v<To, int64_t> && std::is_same_v<From, float>) {
    constexpr float kLimit = 9.2233720368547758e18f;  // 2^63
    return v >= kLimit ? INT64_MAX : v <= -kLimit ? INT64_MIN : int64_t(v);
  } else {
    return To(v);
  }
}

// Calls f(T*{}) with the element type of dtype t (host code: the CPU
// backend's and the CUDA launchers' switches over dtypes).
template <class F>
inline void with_element(DType t, F&& f) {
  switch (t) {
    case DType::f32:
      return f(static_cast<float*>(nullptr));
    case DType::i32:
      return f(static_cast<int32_t*>(nullptr));
    case DType::u8:
      return f(static_cast<uint8_t*>(nullptr));
    case DType::i64:
      return f(static_cast<int64_t*>(nullptr));
    case DType::bf16:
      return f(static_cast<bf16_t*>(nullptr));
    case DType::f16:
      return f(static_cast<f16_t*>(nullptr));
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
