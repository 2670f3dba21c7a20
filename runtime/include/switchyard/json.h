// A JSON string literal for the few places that write JSON by hand (the
// CLI, the bench, the profiler's trace).
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace switchyard {

// `s` quoted and escaped as a JSON string (control characters as \u00XX).
inline std::string json_quote(std::string_view s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += c;
  }
  return o + "\"";
}

}  // namespace switchyard
