// SPDX-License-Identifier: MIT
// matmul of N x N tensors in f32, bf16 and f16 on one device, through the
// public ops (so a 16-bit product includes whatever casts its kernels need):
// the median of REPS timed products after a warm-up, in GFLOP/s, and the
// kernel launches and argument bytes one product takes (the device's
// counters). Compares the dtypes on the same device in the same run; the
// row "f32/high" is f32 under set_float32_matmul_precision("high") (TF32 on
// CUDA devices of compute capability 8.0 and up, FP32 elsewhere).
//   bench_half_matmul DEVICE [N=512] [REPS=7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "switchyard/backend/device.h"
#include "switchyard/switchyard.h"

namespace sy = switchyard;

int main(int argc, char** argv) {
  try {
    if (argc < 2) {
      std::fprintf(stderr, "usage: bench_half_matmul DEVICE [N=512] [REPS=7]\n");
      return 2;
    }
    sy::Device& d = sy::device(argv[1]);
    const int64_t n = argc > 2 ? std::atoll(argv[2]) : 512;
    const int reps = argc > 3 ? std::atoi(argv[3]) : 7;
    if (n < 1 || n > 8192 || reps < 1) {
      std::fprintf(stderr, "bench_half_matmul: expected N in [1, 8192] and REPS >= 1\n");
      return 2;
    }
    sy::BackendDevice& bd = sy::backend_of(d);
    sy::manual_seed(1);
    const sy::Tensor a32 = sy::randn({n, n}, d), b32 = sy::randn({n, n}, d);
    std::printf("matmul %lldx%lldx%lld on %s (median of %d)\n", (long long)n, (long long)n,
                (long long)n, d.str().c_str(), reps);
    struct Row {
      const char* name;
      sy::DType t;
      const char* precision;
    };
    for (const Row row :
         {Row{"f32", sy::DType::f32, "highest"}, Row{"f32/high", sy::DType::f32, "high"},
          Row{"bf16", sy::DType::bf16, "highest"}, Row{"f16", sy::DType::f16, "highest"}}) {
      const sy::DType t = row.t;
      sy::set_float32_matmul_precision(row.precision);
      const sy::Tensor a = a32.to(t), b = b32.to(t);
      sy::eval({a, b});
      sy::eval({sy::matmul(a, b)});  // warm-up: plans, pipelines
      sy::synchronize(d);
      std::vector<double> s;
      uint64_t launches = 0, bytes = 0;
      for (int r = 0; r < reps; ++r) {
        const sy::Counters c0 = bd.counters();
        const auto t0 = std::chrono::steady_clock::now();
        sy::Tensor c = sy::matmul(a, b);
        sy::eval({c});
        sy::synchronize(d);
        s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        launches = bd.counters().kernel_launches - c0.kernel_launches;
        bytes = bd.counters().kernel_bytes - c0.kernel_bytes;
      }
      std::sort(s.begin(), s.end());
      const double med = s[s.size() / 2];
      std::printf("  %-8s %8.2f GFLOP/s  %.3f ms  %llu launches  %.2f MB of kernel arguments\n",
                  row.name, 2.0 * double(n) * double(n) * double(n) / med * 1e-9, med * 1e3,
                  (unsigned long long)launches, double(bytes) / 1e6);
    }
    sy::set_float32_matmul_precision("highest");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_half_matmul: %s\n", e.what());
    return 1;
  }
}
