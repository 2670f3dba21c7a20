// SPDX-License-Identifier: MIT
// The compute-capability check (see cuda_arch.h).
#include "cuda_arch.h"

#include <charconv>
#include <vector>

#include "switchyard/error.h"

namespace switchyard::cuda_impl {

std::string_view built_architectures() {
#ifdef SWITCHYARD_CUDA_ARCHS
  return SWITCHYARD_CUDA_ARCHS;
#else
  return {};
#endif
}

namespace {

struct Arch {
  int cc = 0;         // 86 for 8.6
  bool sass = false;  // machine code
  bool ptx = false;   // PTX the driver compiles
  char suffix = 0;    // 'a': that compute capability only; 'f': its family (major) only
};

// One entry of a CMAKE_CUDA_ARCHITECTURES list; false where unreadable.
bool parse(std::string_view e, Arch& a) {
  const char* b = e.data();
  const char* end = b + e.size();
  auto [p, ec] = std::from_chars(b, end, a.cc);
  if (ec != std::errc() || a.cc < 10) return false;
  std::string_view rest(p, size_t(end - p));
  if (!rest.empty() && (rest[0] == 'a' || rest[0] == 'f')) {
    a.suffix = rest[0];
    rest.remove_prefix(1);
  }
  if (rest.empty()) {
    a.sass = a.ptx = true;
  } else if (rest == "-real") {
    a.sass = true;
  } else if (rest == "-virtual") {
    a.ptx = true;
  } else {
    return false;
  }
  return true;
}

std::string cc_str(int cc) { return detail::cat(cc / 10, ".", cc % 10); }

}  // namespace

std::string unsupported_reason(int major, int minor, std::string_view archs) {
  const int cc = major * 10 + minor;
  std::vector<Arch> list;
  size_t start = 0;
  while (start <= archs.size()) {
    size_t semi = archs.find_first_of(";,", start);
    if (semi == std::string_view::npos) semi = archs.size();
    std::string_view e = archs.substr(start, semi - start);
    start = semi + 1;
    if (e.empty()) continue;
    Arch a;
    if (!parse(e, a)) return {};  // native, all, all-major...: cannot tell here
    list.push_back(a);
  }
  if (list.empty()) return {};
  int oldest = list.front().cc;
  for (const Arch& a : list) {
    const bool same_family = a.cc / 10 == cc / 10 && a.cc <= cc;
    if (a.sass && (a.suffix == 'a' ? a.cc == cc : same_family)) return {};
    if (a.ptx && (a.suffix == 'a' ? a.cc == cc : a.suffix == 'f' ? same_family : a.cc <= cc))
      return {};
    oldest = std::min(oldest, a.cc);
  }
  return detail::cat("compute capability ", cc_str(cc), " has no kernels in this build (built for ",
                     archs, cc < oldest ? detail::cat(", the oldest sm_", oldest) : std::string(),
                     "): rebuild with -DCMAKE_CUDA_ARCHITECTURES=", cc,
                     " and a CUDA toolkit that supports it");
}

}  // namespace switchyard::cuda_impl
