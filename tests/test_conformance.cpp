// SPDX-License-Identifier: MIT
// Cross-backend conformance, driven by the kernel table: every kernel, on
// every available device, against a double-precision reference
// (conformance_cases.cpp). Shapes go below, at and above the GEMM tile sizes, and through odd
// sizes (1, 3, 17, 255, 1000). Each case runs the kernel alone through
// BackendDevice::execute on buffers whose outputs were poisoned (all bytes 0xff, a
// NaN) first. Error is the normalized squared error sum((y-r)^2)/sum(r^2);
// integer outputs must match exactly.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>

#include "conformance_cases.h"
#include "conformance_util.h"
#include "helpers.h"

using sy::Kernel;

using conformance::Case;
using conformance::cases_for;
using conformance::HostArg;

namespace {

// Runs one case on a device; returns "" or what went wrong.
std::string run_case(sy::BackendDevice& dev, const Case& c) {
  std::vector<sy::Buffer> bufs;
  std::vector<sy::Binding> bind;
  sy::Program p;
  static uint64_t id = uint64_t(1) << 40;
  p.id = ++id;
  p.num_slots = uint32_t(c.args.size());
  sy::Instr ins = c.ins;
  // A 16-bit argument gets guard bytes around it (the bytes before a view's
  // offset, 4 after its end), filled with a pattern checked after the run:
  // a kernel storing whole words where a word is shared would change them.
  constexpr uint8_t kGuard = 0xa5;
  auto guarded = [&](size_t a) { return sy::is_half(c.args[a].dtype); };
  for (size_t a = 0; a < c.args.size(); ++a) {
    const size_t n = c.args[a].bytes.size();
    size_t bytes = std::max<size_t>(n, 4) + c.offset + (guarded(a) ? 4 : 0);
    bufs.push_back(dev.allocate(bytes));
    if (guarded(a)) {
      const std::vector<uint8_t> guard(bytes, kGuard);
      dev.upload(bufs.back(), 0, guard.data(), bytes);
    }
    dev.upload(bufs.back(), c.offset, c.args[a].bytes.data(), n);
    bind.push_back({bufs.back(), c.offset});
    const sy::Arg arg{uint32_t(a), 0, c.args[a].bytes.size()};
    if (ins.nmore)
      p.more_args.push_back(arg);
    else
      ins.args[a] = arg;
  }
  p.instrs.push_back(ins);
  std::string err;
  try {
    dev.execute(p, bind);
    for (size_t a = 0; a < c.args.size() && err.empty(); ++a) {
      if (!guarded(a)) continue;
      const size_t n = c.args[a].bytes.size();
      std::vector<uint8_t> all(n + c.offset + 4);
      dev.download(bufs[a], 0, all.data(), all.size());
      dev.synchronize();
      for (size_t j = 0; j < all.size() && err.empty(); ++j)
        if ((j < c.offset || j >= c.offset + n) && all[j] != kGuard)
          err = sy::detail::cat("arg ", a, ": guard byte ", j, " (the tensor is bytes ", c.offset,
                                "..", c.offset + n, ") changed to ", int(all[j]));
    }
    for (size_t a = 0; a < c.args.size() && err.empty(); ++a) {
      const HostArg& h = c.args[a];
      if (h.expect.empty()) continue;
      std::vector<uint8_t> got(h.bytes.size());
      dev.download(bufs[a], c.offset, got.data(), got.size());
      dev.synchronize();
      size_t n = h.expect.size();
      if (h.dtype == sy::DType::f32) {
        std::vector<float> f(n);
        std::memcpy(f.data(), got.data(), n * 4);
        double e = nse(f, h.expect);
        if (!(e <= c.bound)) {
          size_t worst = 0;
          for (size_t j = 0; j < n; ++j)
            if (!(std::abs(f[j] - h.expect[j]) <= std::abs(f[worst] - h.expect[worst]))) worst = j;
          err = sy::detail::cat("arg ", a, ": NSE ", e, " > ", c.bound, "; worst at ", worst, ": ",
                                f[worst], " vs ", h.expect[worst]);
        }
      } else if (sy::is_half(h.dtype)) {  // exact: the reference rounds as the kernels must
        for (size_t j = 0; j < n && err.empty(); ++j) {
          uint16_t w;
          std::memcpy(&w, got.data() + 2 * j, 2);
          const double v = conformance::half_value(w, h.dtype);
          const double e = h.expect[j];
          bool same = std::isnan(e) ? std::isnan(v) : v == e && std::signbit(v) == std::signbit(e);
          if (!same && c.half_ulps > 0 && !std::isnan(e) && !std::isnan(v)) {
            // Words of one sign are ordered as their values: ulps apart.
            const int we = conformance::half_bits(e, h.dtype), wv = w;
            same = (we & 0x8000) == (wv & 0x8000) && std::abs(we - wv) <= c.half_ulps;
          }
          if (!same)
            err = sy::detail::cat("arg ", a, ": ", sy::dtype_name(h.dtype), " element ", j, " is ",
                                  v, " (bits ", w, "), expected ", h.expect[j]);
        }
      } else {
        for (size_t j = 0; j < n && err.empty(); ++j) {
          double v =
              h.dtype == sy::DType::i32   ? double(reinterpret_cast<const int32_t*>(got.data())[j])
              : h.dtype == sy::DType::i64 ? double(reinterpret_cast<const int64_t*>(got.data())[j])
                                          : double(got[j]);
          if (v != h.expect[j])
            err =
                sy::detail::cat("arg ", a, ": element ", j, " is ", v, ", expected ", h.expect[j]);
        }
      }
    }
  } catch (const std::exception& e) {
    err = std::string("threw: ") + e.what();
  }
  for (auto& b : bufs) dev.release(b);
  return err;
}

using KernelParam = std::tuple<std::string, int>;

class Conformance : public ::testing::TestWithParam<KernelParam> {};

TEST_P(Conformance, KernelMatchesDoublePrecisionReference) {
  SKIP_UNLESS_AVAILABLE(std::get<0>(GetParam()));
  sy::BackendDevice& dev = sy::backend_device(std::get<0>(GetParam()));
  Kernel k = Kernel(std::get<1>(GetParam()));
  // A multi-tensor kernel a backend leaves to its per-tensor kernel (the
  // runtime never records it there: optim.cpp asks supports()).
  if (!dev.supports(k)) GTEST_SKIP() << sy::kernel_name(k) << " is not a kernel of " << dev.str();
  auto cases = cases_for(k);
  ASSERT_FALSE(cases.empty()) << "no conformance cases for kernel " << sy::kernel_name(k);
  int failed = 0, not_read = 0;
  dev.release(dev.allocate(16));  // set up: gemm_writes needs the device's limits
  const char* times_env = std::getenv("SY_CONFORMANCE_TIMES");
  const bool times = times_env && std::string(times_env) == "1";
  for (const Case& c : cases) {
    // 16-bit gemm operands where the backend's gemm reads only f32 (the
    // ops widen them there first): counted and printed, not run.
    if (c.ins.kernel == Kernel::gemm &&
        (!dev.gemm_reads(sy::params<Kernel::gemm>(c.ins.params).ab_dtype) ||
         !dev.gemm_writes(sy::params<Kernel::gemm>(c.ins.params)))) {
      ++not_read;
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::string err = run_case(dev, c);
    if (times)  // SY_CONFORMANCE_TIMES=1: where a kernel's cases spend the time
      std::printf(
          "  %8.1f ms  %s\n",
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
          c.name.c_str());
    if (!err.empty()) {
      ++failed;
      ADD_FAILURE() << sy::kernel_name(k) << " [" << c.name << "] on " << dev.str() << ": " << err;
    }
  }
  std::printf("%s on %s: %zu cases, %d failed%s\n", sy::kernel_name(k), dev.str().c_str(),
              cases.size() - size_t(not_read), failed,
              not_read ? sy::detail::cat(" (", not_read,
                                         " with 16-bit operands or outputs not run: this "
                                         "device's gemm does not read or write them, the ops "
                                         "cast around it)")
                             .c_str()
                       : "");
}

#ifdef SWITCHYARD_TEST_CUDA_EMU
// test_cuda_emu: this file again, on the CUDA backend run by the CPU
// emulation of CUDA and cuBLAS (tests/cuda_emu).
std::vector<KernelParam> all_params() {
  std::vector<KernelParam> v;
  std::string d = sy::cuda_impl::emulated_cuda_device().str();
  for (int k = 0; k < sy::kNumKernels; ++k)
    if (!sy::kernel_has(Kernel(k), sy::kUserKernel)) v.emplace_back(d, k);
  return v;
}
#else
std::vector<KernelParam> all_params() {
  std::vector<KernelParam> v;
  for (const std::string& d : conformance_devices())
    for (int k = 0; k < sy::kNumKernels; ++k)
      if (!sy::kernel_has(Kernel(k), sy::kUserKernel)) v.emplace_back(d, k);
  return v;
}
#endif

INSTANTIATE_TEST_SUITE_P(KernelTable, Conformance, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<KernelParam>& i) {
                           return device_param_name(std::get<0>(i.param)) + "_" +
                                  sy::kernel_name(Kernel(std::get<1>(i.param)));
                         });

}  // namespace
