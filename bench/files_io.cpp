// SPDX-License-Identifier: MIT
// Save and load throughput of safetensors files: one tensor of SIZE MiB
// (default 128), saved (read back from the device, checksummed, written,
// fsync'd, renamed) and loaded (mapped, checksum verified, uploaded), three
// times each; prints GB/s per round. The file goes to DIR (default: the
// system's temporary directory) and is removed at the end.
//   bench_files_io [DEVICE=cpu] [SIZE_MIB=128] [DIR]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "switchyard/switchyard.h"

namespace sy = switchyard;

int main(int argc, char** argv) {
  try {
    sy::Device& d = sy::device(argc > 1 ? argv[1] : "cpu");
    const int64_t mib = argc > 2 ? std::atoll(argv[2]) : 128;
    if (mib < 1 || mib > (int64_t(1) << 20)) {
      std::fprintf(stderr, "bench_files_io: expected SIZE_MIB in [1, 2^20], found %s\n", argv[2]);
      return 2;
    }
    const std::string path =
        ((argc > 3 ? std::filesystem::path(argv[3]) : std::filesystem::temp_directory_path()) /
         "switchyard_bench_files_io.safetensors")
            .string();
    const int64_t n = mib << 18;  // floats
    sy::NamedTensors ts{{"w", sy::rand({n}, d)}};
    sy::eval({ts[0].second});
    using clock = std::chrono::steady_clock;
    for (int r = 1; r <= 3; ++r) {
      auto t0 = clock::now();
      sy::save_safetensors(path, ts);
      auto t1 = clock::now();
      auto back = sy::load_safetensors(path, d);
      sy::synchronize(d);
      auto t2 = clock::now();
      const double s = std::chrono::duration<double>(t1 - t0).count();
      const double l = std::chrono::duration<double>(t2 - t1).count();
      std::printf(
          "{\"device\":\"%s\",\"mib\":%lld,\"round\":%d,\"save_gb_s\":%.3f,\"load_gb_s\":%.3f}\n",
          d.str().c_str(), (long long)mib, r, double(n) * 4 / s / 1e9, double(n) * 4 / l / 1e9);
    }
    std::filesystem::remove(path);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_files_io: %s\n", e.what());
    return 1;
  }
}
