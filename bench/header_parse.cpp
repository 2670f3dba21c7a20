// SPDX-License-Identifier: MIT
// How long a safetensors header of N empty tensors takes to open (parse and
// check): the file is written by hand and opened three times; prints
// seconds per round. The file goes to DIR (default: the system's temporary directory)
// and is removed at the end. Header parsing is linear in the header's size
// (runtime/src/json_check.h); this puts a figure on it.
//   bench_header_parse [ENTRIES=1000000] [DIR]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "switchyard/switchyard.h"

namespace sy = switchyard;

int main(int argc, char** argv) {
  try {
    const long long n = argc > 1 ? std::atoll(argv[1]) : 1000000;
    if (n < 1 || n > (1 << 20)) {
      std::fprintf(stderr, "bench_header_parse: expected ENTRIES in [1, 2^20], found %s\n",
                   argv[1]);
      return 2;
    }
    const std::string path =
        ((argc > 2 ? std::filesystem::path(argv[2]) : std::filesystem::temp_directory_path()) /
         "switchyard_bench_header_parse.safetensors")
            .string();
    std::string h = "{";
    for (long long i = 0; i < n; ++i) {
      h += i ? ",\"t" : "\"t";
      h += std::to_string(i);
      h += "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
    }
    h += "}";
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(uint64_t(h.size()) >> (8 * i));
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), 8)
        .write(h.data(), std::streamsize(h.size()));
    using clock = std::chrono::steady_clock;
    auto secs = [](clock::time_point t) {
      return std::chrono::duration<double>(clock::now() - t).count();
    };
    for (int r = 1; r <= 3; ++r) {
      const auto t = clock::now();
      sy::SafetensorsFile f(path);
      std::printf("{\"entries\":%lld,\"header_mb\":%.1f,\"round\":%d,\"open_s\":%.3f}\n", n,
                  double(h.size()) / 1e6, r, secs(t));
      if (f.entries().size() != size_t(n)) return 1;
    }
    std::filesystem::remove(path);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_header_parse: %s\n", e.what());
    return 1;
  }
}
