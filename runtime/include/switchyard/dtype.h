// Element types and shapes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace switchyard {

enum class DType : uint8_t { f32, i32, u8 };

inline size_t dtype_size(DType t) { return t == DType::u8 ? 1 : 4; }
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
    case DType::u8:
      return "u8";
  }
  return "?";
}

using Shape = std::vector<int64_t>;

inline int64_t numel(const Shape& s) {
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
