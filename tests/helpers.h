// Shared test helpers: random data, double-precision comparisons, a second
// (mock) device for mixed-device checks.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend_api.h"
#include "switchyard/switchyard.h"

namespace sy = switchyard;

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Normalized squared error sum((a-b)^2) / sum(b^2), as ggml's test-backend-ops.
inline double nse(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? num / den : num;
}

inline std::vector<double> to_d(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// A second device: a CPU device registered as backend "mock".
inline sy::Device& mock_device() {
  static sy::Device* d = [] {
    sy::register_backend({"mock", true, "", {sy::detail::make_cpu_device("mock", 0)}});
    return &sy::device("mock:0");
  }();
  return *d;
}

// Runs fn, expects a switchyard::Error whose message contains every needle.
template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected a switchyard::Error";
  } catch (const sy::Error& e) {
    std::string msg = e.what();
    for (auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg << "\nmissing: " << n;
  }
}
