// SPDX-License-Identifier: MIT
// Shared test helpers: random data, double-precision comparisons, a second
// (mock) device for mixed-device checks.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "backend_api.h"
#include "switchyard/switchyard.h"
#ifdef SWITCHYARD_TEST_CUDA_EMU
#include "emu_device.h"
#endif

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

// The largest difference relative to b's largest magnitude (gradients of
// one model computed two ways).
inline double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num = std::max(num, std::abs(double(a[i]) - double(b[i])));
    den = std::max(den, std::abs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

// A second device: a CPU device registered as backend "mock".
// The names of a state_dict, in order.
inline std::vector<std::string> names_of(const sy::NamedTensors& sd) {
  std::vector<std::string> out;
  for (auto& [n, t] : sd) out.push_back(n);
  return out;
}

// A test double: a device of backend `name` that hands everything to a CPU
// device of its own. Doubles override what they change (a kernel missing,
// a queue, a delay).
class CpuDouble : public sy::BackendDevice {
 public:
  CpuDouble(const std::string& name, const std::string& what)
      : sy::BackendDevice({name, 0, what, sy::DeviceType::cpu, 1 << 30, {}}),
        inner_(sy::detail::make_cpu_device(name + "_inner", 0)),
        cpu_(sy::backend_of(*inner_)) {}
  bool supports(sy::Kernel k) const override { return cpu_.supports(k); }
  void* host_pointer(sy::Buffer b) override { return cpu_.host_pointer(b); }

 protected:
  sy::Buffer allocate_impl(size_t n) override { return cpu_.allocate(n); }
  void release_impl(sy::Buffer b) override { cpu_.release(b); }
  void upload_impl(sy::Buffer d, size_t o, const void* s, size_t n) override {
    cpu_.upload(d, o, s, n);
  }
  void download_impl(sy::Buffer s, size_t o, void* d, size_t n) override {
    cpu_.download(s, o, d, n);
  }
  void copy_impl(sy::Buffer s, size_t so, sy::Buffer d, size_t dof, size_t n) override {
    cpu_.copy(s, so, d, dof, n);
  }
  void execute_impl(const sy::Program& p, std::span<const sy::Binding> b) override {
    cpu_.execute(p, b);
  }
  void synchronize_impl() override { cpu_.synchronize(); }

  std::shared_ptr<sy::Device> inner_;
  sy::BackendDevice& cpu_;
};

inline sy::BackendDevice& mock_device() {
  static sy::BackendDevice* d = [] {
    sy::register_backend({"mock", true, "", {sy::detail::make_cpu_device("mock", 0)}});
    return &sy::backend_device("mock:0");
  }();
  return *d;
}

// Why the named device cannot be used here ("" when it can).
inline std::string unavailable_reason(const std::string& name) {
  std::string backend = name.substr(0, name.find(':'));
  for (auto& b : sy::backends()) {
    if (b.name != backend) continue;
    if (!b.available) return b.reason;
    try {
      (void)sy::backend_device(name);
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  return "no backend named '" + backend + "' in this build";
}

// SWITCHYARD_REQUIRE_<BACKEND>=1 (the GPU check script, and ctest for
// Vulkan here) turns a skip for that backend into a failure.
inline bool backend_required(const std::string& name) {
  std::string var = "SWITCHYARD_REQUIRE_" + name.substr(0, name.find(':'));
  for (auto& c : var) c = char(std::toupper(static_cast<unsigned char>(c)));
  const char* v = std::getenv(var.c_str());
  return v && std::string(v) == "1";
}

// The CUDA device the CUDA suite runs on.
inline std::string cuda_test_device() {
#ifdef SWITCHYARD_TEST_CUDA_EMU
  return sy::cuda_impl::emulated_cuda_device().str();
#else
  return "cuda:0";
#endif
}

// Skips the test (reported by ctest as skipped, with the reason) when the
// device is absent; fails it when its backend is required.
#define SKIP_UNLESS_AVAILABLE(name)                                                                \
  do {                                                                                             \
    std::string sy_why_ = unavailable_reason(name);                                                \
    if (!sy_why_.empty()) {                                                                        \
      if (backend_required(name)) FAIL() << (name) << " is required but unavailable: " << sy_why_; \
      GTEST_SKIP() << (name) << " unavailable: " << sy_why_;                                       \
    }                                                                                              \
  } while (0)

// Every available device plus the mock one: the op conformance suites run on
// each (a CPU double under another name catches ops that quietly create
// tensors on the default device). GPU backends built into this binary are
// listed even without a device, so their cases show up as skipped.
inline std::vector<std::string> conformance_devices() {
  std::vector<std::string> names;
  for (sy::Device* d : sy::devices())
    if (d->info().backend != "mock") names.push_back(d->str());
  for (const auto& g : sy::detail::gpu_backends())
    if (std::string first = std::string(g.name) + ":0";
        g.probe && std::find(names.begin(), names.end(), first) == names.end())
      names.push_back(first);
  names.push_back(mock_device().str());
  return names;
}

// The GPU devices the GPU suites run on: the first of each GPU backend built
// (in test_cuda_emu: the CUDA backend on the emulation).
inline std::vector<std::string> gpu_devices() {
  std::vector<std::string> names;
#ifdef SWITCHYARD_TEST_CUDA_EMU
  return {sy::cuda_impl::emulated_cuda_device().str()};
#endif
  for (const auto& g : sy::detail::gpu_backends())
    if (g.probe) names.push_back(std::string(g.name) + ":0");
  return names;
}

inline std::string device_param_name(std::string n) {
  for (auto& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class OnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { SKIP_UNLESS_AVAILABLE(GetParam()); }
  sy::BackendDevice& D() const { return sy::backend_device(GetParam()); }
};

template <class P>
class DeviceTest : public ::testing::TestWithParam<std::tuple<std::string, P>> {
 protected:
  void SetUp() override { SKIP_UNLESS_AVAILABLE(std::get<0>(this->GetParam())); }
  sy::BackendDevice& D() const { return sy::backend_device(std::get<0>(this->GetParam())); }
  const P& C() const { return std::get<1>(this->GetParam()); }
};

// A device's backend-specific property ("" when it has none by that name).
inline std::string device_property(const sy::BackendDevice& d, const std::string& key) {
  for (auto& [k, v] : d.info().properties)
    if (k == key) return v;
  return "";
}

// Runs fn, expects a switchyard::Error whose message contains every needle.
template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected a switchyard::Error";
  } catch (const sy::Error& e) {
    std::string msg = e.what();
    for (auto& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg << "\nmissing: " << n;
  }
}

// A Program of one launch of `k`: argument j is slot j, bytes[j] long.
inline sy::Program one_launch(uint64_t id, sy::Kernel k, sy::KernelParams params,
                              std::initializer_list<uint64_t> bytes) {
  sy::Program p;
  p.id = id;
  p.num_slots = uint32_t(bytes.size());
  sy::Instr ins;
  ins.kernel = k;
  ins.nargs = uint8_t(bytes.size());
  uint32_t j = 0;
  for (uint64_t b : bytes) ins.args[j] = {j, 0, b}, ++j;
  ins.params = params;
  p.instrs = {ins};
  return p;
}
