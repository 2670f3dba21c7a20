// SPDX-License-Identifier: MIT
// Element types and shapes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace switchyard {

// i64 holds what PyTorch keeps in int64 (class labels, indices): it is
// created, moved, cast and printed like the others, and ops that take
// integer inputs (cross_entropy's labels, comparisons, sums) accept it.
// Converting i64 to i32 saturates at the i32 limits (PyTorch wraps), so an
// out-of-range label stays out of range.
//
// bf16 (bfloat16: f32's 8-bit exponent, 7 stored mantissa bits) and f16
// (IEEE binary16: 5-bit exponent, 10 mantissa bits) are the two reduced
// precisions. They are stored as 16-bit words and computed in f32: a kernel
// reads them widened (exactly) and writes them rounded to nearest even.
// Casts to them round to nearest even; NaN stays NaN; f16 overflows to
// infinity past 65504 (as PyTorch, CUDA and the IEEE conversion).
enum class DType : uint8_t { f32, i32, u8, i64, bf16, f16 };
constexpr int kNumDTypes = int(DType::f16) + 1;  // keep f16 last, or update this

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::u8:
      return 1;
    case DType::bf16:
    case DType::f16:
      return 2;
    case DType::i64:
      return 8;
    default:
      return 4;
  }
}
// The floating-point dtypes (gradients flow through them; casts between
// them are differentiable).
inline bool is_floating(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }
// The 16-bit floating-point dtypes.
inline bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
    case DType::u8:
      return "u8";
    case DType::i64:
      return "i64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
  }
  return "?";
}

// Shorthands, as torch::kBFloat16: sy::autocast guard(sy::bf16).
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType f16 = DType::f16;

using Shape = std::vector<int64_t>;

// Shapes are checked when made (no product overflows); a zero dimension
// makes the count 0 whatever the others are.
inline int64_t numel(const Shape& s) {
  for (auto d : s)
    if (d == 0) return 0;
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// "(32,784)"; a scalar is "()".
inline std::string shape_str(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ',';
    r += std::to_string(s[i]);
  }
  return r + ")";
}

}  // namespace switchyard
