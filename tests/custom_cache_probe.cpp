// SPDX-License-Identifier: MIT
// For tests/custom_kernel_cache.sh: compiles the sample's bias + SiLU kernel
// on a device (or loads it from the disk cache), checks one launch against
// the CPU's, and prints this process's compile counters and times, and
// what a cached launch costs: a call that launches it on 1024 elements and
// reads the result back, next to the same work in three built-in ops.
//   custom_cache_probe DEVICE
#include <chrono>
#include <cmath>
#include <cstdio>

#include "../samples/bias_silu.h"
#include "switchyard/switchyard.h"

namespace sy = switchyard;

int main(int argc, char** argv) {
  try {
    sy::Device& d = sy::device(argc > 1 ? argv[1] : "vulkan:0");
    sy::manual_seed(1);
    sy::Tensor x = sy::randn({64, 33}), b = sy::randn({33});
    const auto t0 = std::chrono::steady_clock::now();
    bias_silu::forward_kernel().compile(d);
    const auto t1 = std::chrono::steady_clock::now();
    const auto got = bias_silu::apply(x.to(d), b.to(d)).to_vector<float>();
    const auto want = bias_silu::apply(x, b).to_vector<float>();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::fmax(worst, std::fabs(got[i] - want[i]));
    if (!(worst < 1e-5)) {
      std::fprintf(stderr, "error: %s differs from the CPU by %g\n", d.str().c_str(), worst);
      return 1;
    }
    const sy::CustomKernelStats s = sy::custom_kernel_stats();
    sy::Tensor xs = sy::randn({16, 64}).to(d), bs = sy::randn({64}).to(d);
    auto per_call_us = [](auto&& f) {
      f();  // planned and recorded once
      const int n = 200;
      const auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) f();
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t)
                 .count() /
             n;
    };
    const double custom_us =
        per_call_us([&] { (void)bias_silu::apply(xs, bs).to_vector<float>(); });
    const double builtin_us = per_call_us([&] {
      sy::Tensor z = sy::add(xs, bs);
      (void)sy::mul(z, sy::sigmoid(z)).to_vector<float>();
    });
    std::printf(
        "compiles=%llu disk_hits=%llu corrupt=%llu disk_writes=%llu compile_ms=%.1f "
        "ready_ms=%.1f custom_call_us=%.0f builtin_call_us=%.0f\n",
        static_cast<unsigned long long>(s.compiles), static_cast<unsigned long long>(s.disk_hits),
        static_cast<unsigned long long>(s.corrupt_entries),
        static_cast<unsigned long long>(s.disk_writes), s.compile_seconds * 1e3,
        std::chrono::duration<double, std::milli>(t1 - t0).count(), custom_us, builtin_us);
    return 0;
  } catch (const sy::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
