// SPDX-License-Identifier: MIT
// Byte counts as people read them, for backends' messages ("64 MiB",
// "2.00 GiB"). Shared by the GPU backends.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace switchyard {

inline std::string mib(uint64_t b) {
  char s[32];
  const double m = double(b) / double(1ull << 20);
  if (b >= (1ull << 30))
    std::snprintf(s, sizeof s, "%.2f GiB", double(b) / double(1ull << 30));
  else
    std::snprintf(s, sizeof s, m >= 10 ? "%.0f MiB" : "%.2f MiB", m);
  return s;
}

}  // namespace switchyard
