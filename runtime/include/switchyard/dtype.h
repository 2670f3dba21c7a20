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
enum class DType : uint8_t { f32, i32, u8, i64 };
constexpr int kNumDTypes = int(DType::i64) + 1;  // keep i64 last, or update this

inline size_t dtype_size(DType t) { return t == DType::u8 ? 1 : t == DType::i64 ? 8 : 4; }
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
  }
  return "?";
}

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
