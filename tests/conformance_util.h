// SPDX-License-Identifier: MIT
// Internal to the conformance suite: building cases (inputs, poisoned
// outputs with their expected values) and the cases of the layer kernels
// (conformance_cases_nn.cpp).
#pragma once
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "conformance_cases.h"

namespace conformance {

template <class T>
inline HostArg input(const std::vector<T>& v, sy::DType t) {
  HostArg a;
  a.dtype = t;
  a.bytes.resize(v.size() * sizeof(T));
  std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  return a;
}
inline HostArg f32(const std::vector<float>& v) { return input(v, sy::DType::f32); }
inline HostArg i32(const std::vector<int32_t>& v) { return input(v, sy::DType::i32); }
inline HostArg i64(const std::vector<int64_t>& v) { return input(v, sy::DType::i64); }
inline HostArg u8(const std::vector<uint8_t>& v) { return input(v, sy::DType::u8); }
// An output of n elements, poisoned, with its expected values.
inline HostArg out(sy::DType t, std::vector<double> expect) {
  HostArg a;
  a.dtype = t;
  a.bytes.assign(expect.size() * sy::dtype_size(t), 0xff);
  a.expect = std::move(expect);
  return a;
}
inline HostArg outf(std::vector<double> e) { return out(sy::DType::f32, std::move(e)); }

// ---- bf16 and f16, in double precision ----------------------------------------------
// A reference independent of the kernels' bit operations (pointwise.h,
// common.glsl): x rounded to the nearest bf16 (f16) value, ties to even,
// with subnormals and overflow to infinity; NaN stays NaN.
inline double round_half(double x, sy::DType t) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const int mant = t == sy::DType::bf16 ? 7 : 10, min_exp = t == sy::DType::bf16 ? -126 : -14;
  const double max = t == sy::DType::bf16 ? std::ldexp(2 - std::ldexp(1, -7), 127) : 65504;
  int e;
  std::frexp(std::fabs(x), &e);  // |x| = m 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1, std::max(e - 1, min_exp) - mant);
  const double v = std::nearbyint(std::fabs(x) / ulp) * ulp;  // ties to even
  return std::copysign(v > max ? HUGE_VAL : v, x);
}
// The 16-bit word of a value exactly representable in dtype t, and back.
inline uint16_t half_bits(double v, sy::DType t) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (t == sy::DType::bf16) {
    const float f = float(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return uint16_t(u >> 16);
  }
  const double a = std::fabs(v);
  if (std::isnan(v)) return 0x7e00;
  if (std::isinf(v)) return uint16_t(sign | 0x7c00);
  if (a < std::ldexp(1, -14)) return uint16_t(sign | uint16_t(a * std::ldexp(1, 24)));
  int e;
  const double m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  return uint16_t(sign | uint16_t((e + 14) << 10) | uint16_t((m * 2 - 1) * 1024));
}
inline double half_value(uint16_t h, sy::DType t) {
  if (t == sy::DType::bf16) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double s = h & 0x8000 ? -1 : 1;
  if (e == 31) return m ? NAN : s * HUGE_VAL;
  return s * (e ? std::ldexp(1024 + m, e - 25) : std::ldexp(m, -24));
}
// An input of bf16/f16 elements, each v rounded first (round_half).
inline HostArg half_input(const std::vector<double>& v, sy::DType t) {
  std::vector<uint16_t> h(v.size());
  for (size_t j = 0; j < v.size(); ++j) h[j] = half_bits(round_half(v[j], t), t);
  return input(h, t);
}

// A case of the kernel `p` belongs to.
inline Case make(std::string name, std::vector<HostArg> args, const sy::KernelParams& p) {
  Case c;
  c.name = std::move(name);
  c.ins.kernel = p.kernel();
  // A multi-tensor kernel's arguments are the Program's more_args (run_case).
  const bool multi = sy::kernel_has(p.kernel(), sy::kMultiTensor);
  c.ins.nargs = multi ? 0 : uint8_t(args.size());
  c.ins.nmore = multi ? uint32_t(args.size()) : 0;
  c.ins.params = p;
  c.args = std::move(args);
  return c;
}

// "3x17x5"
inline std::string sz(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t x : dims) {
    if (!s.empty()) s += 'x';
    s += std::to_string(x);
  }
  return s;
}

// Cases of fill, arange, cast and transpose (conformance_cases_element.cpp).
std::vector<Case> element_cases(sy::Kernel k);
// gemm with bf16 and f16 A and B (GemmParams::ab_dtype; the same file).
std::vector<Case> half_gemm_cases();
// Cases of swap_axes, the convolutions, the pooling and the per-channel kernels.
std::vector<Case> layer_cases(sy::Kernel k);
// Cases of the optimizers' kernels (conformance_cases_optim.cpp).
std::vector<Case> optimizer_cases(sy::Kernel k);

}  // namespace conformance
