// SPDX-License-Identifier: MIT
// The CUDA backend. Some checks run everywhere it is built: its caching
// allocator (driven by malloc here), loading cuBLAS/cuBLASLt by dlopen, and
// the reason it gives when no GPU or driver is present. The rest need a CUDA
// device and are skipped, with the reason, where there is none (failed where
// SWITCHYARD_REQUIRE_CUDA=1). The GPU suites (test_gpu, test_conformance,
// test_grad, test_ops) also run on cuda:0.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>

#include "cuda_allocator.h"
#include "cuda_arch.h"
#include "cuda_blas.h"
#include "cuda_dnn.h"
#include "helpers.h"

using sy::cuda_impl::CachingAllocator;

// Checks of the real backend's enumeration and of host-side pieces: once, in
// test_cuda (test_cuda_emu compiles this file for the device checks below).
#ifndef SWITCHYARD_TEST_CUDA_EMU
namespace {

// A raw allocator over malloc that can be told to fail, and counts.
struct FakeDevice {
  size_t limit = SIZE_MAX, held = 0;
  int allocs = 0, frees = 0;
  std::map<void*, size_t> live;
  CachingAllocator make() {
    return CachingAllocator(
        [this](size_t n) -> void* {
          if (held + n > limit) return nullptr;
          void* p = std::malloc(n);
          live[p] = n;
          held += n;
          ++allocs;
          return p;
        },
        [this](void* p) {
          held -= live.at(p);
          live.erase(p);
          ++frees;
          std::free(p);
        });
  }
};

}  // namespace

TEST(CachingAllocator, ReusesFreedBlocksWithoutNewSegments) {
  FakeDevice f;
  CachingAllocator a = f.make();
  void* p = a.allocate(1000);
  void* q = a.allocate(300000);
  EXPECT_EQ(f.allocs, 1) << "both small: one 2 MiB segment";
  EXPECT_EQ(a.block_size(p), 1024u) << "rounded to 512 bytes";
  a.free(p);
  void* r = a.allocate(700);
  EXPECT_EQ(r, p) << "the freed block is reused";
  EXPECT_EQ(f.allocs, 1);
  a.free(q);
  a.free(r);
  for (int i = 0; i < 100; ++i) {  // a training loop's pattern
    void* x = a.allocate(4096);
    void* y = a.allocate(65536);
    a.free(x);
    a.free(y);
  }
  EXPECT_EQ(f.allocs, 1);
  EXPECT_EQ(a.stats().cache_hits, a.stats().requests - 1);
  EXPECT_EQ(a.stats().allocated_bytes, 0u);
  EXPECT_EQ(a.stats().reserved_bytes, size_t(2) << 20);
}

TEST(CachingAllocator, SplitsAndMergesNeighbours) {
  FakeDevice f;
  CachingAllocator a = f.make();
  void* big = a.allocate(size_t(64) << 20);
  ASSERT_EQ(f.allocs, 1);
  a.free(big);
  // Three blocks carved from the free 64 MiB segment, no new segment.
  void* x = a.allocate(size_t(8) << 20);
  void* y = a.allocate(size_t(8) << 20);
  void* z = a.allocate(size_t(8) << 20);
  EXPECT_EQ(f.allocs, 1);
  EXPECT_EQ(static_cast<char*>(y) - static_cast<char*>(x), ptrdiff_t(8) << 20)
      << "best fit, lowest address";
  a.free(y);
  a.free(x);  // merges with y
  a.free(z);  // and the rest: one free block spans the segment again
  void* whole = a.allocate(size_t(64) << 20);
  EXPECT_EQ(whole, big);
  EXPECT_EQ(f.allocs, 1);
  a.free(whole);
}

TEST(CachingAllocator, SmallAndLargePoolsStayApart) {
  FakeDevice f;
  CachingAllocator a = f.make();
  void* big = a.allocate(size_t(4) << 20);
  a.free(big);
  void* small = a.allocate(512);
  EXPECT_EQ(f.allocs, 2) << "a small request does not split a large block";
  EXPECT_NE(small, big);
  a.free(small);
}

TEST(CachingAllocator, GivesTheCacheBackBeforeFailing) {
  FakeDevice f;
  f.limit = size_t(10) << 20;
  CachingAllocator a = f.make();
  void* p = a.allocate(size_t(6) << 20);
  ASSERT_NE(p, nullptr);
  a.free(p);
  void* q = a.allocate(size_t(8) << 20);  // does not fit next to the cached 6 MiB
  ASSERT_NE(q, nullptr) << "the cached segment was released and the request retried";
  EXPECT_EQ(f.frees, 1);
  EXPECT_EQ(a.allocate(size_t(4) << 20), nullptr) << "then it fails, with nothing to give back";
  a.free(q);
  EXPECT_EQ(a.release_cached(), size_t(8) << 20);
  EXPECT_EQ(f.held, 0u);
  EXPECT_EQ(a.stats().segments, 0u);
}

TEST(CachingAllocator, UnknownOrDoubleFreeIsAnError) {
  FakeDevice f;
  CachingAllocator a = f.make();
  void* p = a.allocate(100);
  a.free(p);
  expect_error([&] { a.free(p); }, {"release", "already freed"});
  int x = 0;
  expect_error([&] { a.free(&x); }, {"release", "unknown"});
}

TEST(CachingAllocator, RandomTrafficKeepsBlocksDisjointAndAccounted) {
  FakeDevice f;
  CachingAllocator a = f.make();
  std::mt19937 rng(7);
  std::map<char*, size_t> live;
  for (int i = 0; i < 5000; ++i) {
    if (!live.empty() && rng() % 2) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      a.free(it->first);
      live.erase(it);
    } else {
      size_t n = rng() % 3 ? 1 + rng() % 200000 : 1 + rng() % (size_t(5) << 20);
      char* p = static_cast<char*>(a.allocate(n));
      ASSERT_NE(p, nullptr);
      ASSERT_GE(a.block_size(p), n);
      auto next = live.lower_bound(p);
      if (next != live.end()) {
        ASSERT_LE(p + a.block_size(p), next->first) << "overlaps the next block";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, p) << "overlaps the previous block";
      }
      live[p] = a.block_size(p);
    }
    size_t sum = 0;
    for (auto& [p, n] : live) sum += n;
    ASSERT_EQ(a.stats().allocated_bytes, sum);
    ASSERT_LE(a.stats().allocated_bytes, a.stats().reserved_bytes);
  }
  for (auto& [p, n] : live) a.free(p);
  a.release_cached();
  EXPECT_EQ(f.held, 0u) << "every segment went back";
}

TEST(CudaBlas, OpensCuBlasAndResolvesEveryEntryPoint) {
  // No GPU or driver is needed to load the libraries (they are only used
  // with a device), so this runs wherever the backend was built.
  try {
    const auto& api = sy::cuda_impl::blas_api();
    EXPECT_NE(api.cublasLtMatmul, nullptr);
    EXPECT_NE(api.cublasGemmEx, nullptr);
    EXPECT_NE(api.cublasGemmStridedBatchedEx, nullptr);
    EXPECT_GT(api.cublasLtGetVersion(), 0u);
    std::printf("cuBLAS: %s, cuBLASLt %zu: %s\n", api.cublas_path.c_str(), api.cublasLtGetVersion(),
                api.lt_path.c_str());
  } catch (const sy::Error& e) {
    GTEST_SKIP() << "no cuBLAS on this machine: " << e.what();
  }
}

TEST(CudaDnn, OpensCudnnAndResolvesEveryEntryPoint) {
  // As cuBLAS: loading needs no GPU, so the real library's entry points and
  // version are checked wherever the backend was built with cuDNN's header.
#if SWITCHYARD_HAVE_CUDNN
  try {
    const auto& api = sy::cuda_impl::dnn_api();
#define SY_CHECK_RESOLVED(name) EXPECT_NE(api.name, nullptr) << #name;
    SY_CUDNN_FUNCS(SY_CHECK_RESOLVED)
#undef SY_CHECK_RESOLVED
    EXPECT_EQ(api.cudnnGetVersion() / 10000, size_t(CUDNN_MAJOR));
    const std::string d = sy::cuda_impl::cudnn_description();
    std::printf("cuDNN %s\n", d.c_str());
    const auto props = sy::cuda_impl::conv_properties();
    if (sy::cuda_impl::conv_path() != sy::cuda_impl::ConvPath::own) {
      ASSERT_EQ(props.size(), 2u);
      EXPECT_EQ(props[0].second, "cuDNN " + d);
    }
  } catch (const sy::Error& e) {
    GTEST_SKIP() << "no cuDNN on this machine: " << e.what();
  }
#else
  GTEST_SKIP() << "built without cuDNN's header: the own convolution kernels only";
#endif
}

TEST(CudaDnn, AnUnknownConvolutionPathIsAClearError) {
  // Read at a device's first convolution (and by `switchyard devices`).
  const char* old = std::getenv("SWITCHYARD_CUDA_CONV");
  const std::string saved = old ? old : "";
  setenv("SWITCHYARD_CUDA_CONV", "cudnn9", 1);
  expect_error([] { (void)sy::cuda_impl::conv_path(); },
               {"SWITCHYARD_CUDA_CONV=auto, cudnn or own", "found 'cudnn9'"});
  const auto props = sy::cuda_impl::conv_properties();
  ASSERT_EQ(props.size(), 1u);
  EXPECT_NE(props[0].second.find("own implicit GEMM (["), std::string::npos) << props[0].second;
  EXPECT_NE(props[0].second.find("found 'cudnn9'"), std::string::npos) << props[0].second;
  if (old)
    setenv("SWITCHYARD_CUDA_CONV", saved.c_str(), 1);
  else
    unsetenv("SWITCHYARD_CUDA_CONV");
}

TEST(Cuda, AbsentDevicesComeWithAReason) {
  const sy::BackendEntry* cuda = nullptr;
  for (auto& b : sy::backends())
    if (b.name == "cuda") cuda = &b;
  ASSERT_NE(cuda, nullptr) << "the cuda backend is always listed";
  if (cuda->available) {
    EXPECT_FALSE(cuda->devices.empty());
    EXPECT_EQ(sy::backend_device("auto").str(), "cuda:0") << "auto prefers CUDA";
    return;
  }
  EXPECT_TRUE(cuda->devices.empty());
  EXPECT_FALSE(cuda->reason.empty());
  EXPECT_EQ(cuda->reason.find("not built"), std::string::npos)
      << "this binary has the backend: " << cuda->reason;
  expect_error([] { (void)sy::backend_device("cuda"); }, {"'cuda' is not available", cuda->reason});
  expect_error([] { (void)sy::backend_device("cuda:1"); }, {"'cuda:1' is not available"});
  EXPECT_NE(sy::backend_device("auto").info().backend, "cuda");
}

TEST(Cuda, DeviceReportsItsProperties) {
  SKIP_UNLESS_AVAILABLE(cuda_test_device());
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  EXPECT_FALSE(d.info().name.empty());
  EXPECT_GT(d.info().memory_bytes, 0u);
  for (const char* k :
       {"compute_capability", "sms", "driver", "runtime", "cublaslt", "convolution"})
    EXPECT_FALSE(device_property(d, k).empty()) << k;
}

TEST(Cuda, GpusWithoutKernelsInThisBuildAreLeftOutWithTheReason) {
  using sy::cuda_impl::unsupported_reason;
  const std::string list = "75-real;80-real;86-real;89-real;90;100-real;120-real";
  // Compute capabilities with SASS, or PTX at or below them: usable.
  for (auto [ma, mi] : {std::pair{7, 5},
                        {8, 0},
                        {8, 6},
                        {8, 7},
                        {8, 9},
                        {9, 0},
                        {10, 0},
                        {10, 3},
                        {11, 0},
                        {12, 0},
                        {12, 1},
                        {13, 0}})
    EXPECT_EQ(unsupported_reason(ma, mi, list), "") << ma << "." << mi;
  // Pascal and Volta: no image at all (CUDA 13 builds nothing older than sm_75).
  for (auto [ma, mi] : {std::pair{6, 1}, {7, 0}, {7, 2}}) {
    std::string why = unsupported_reason(ma, mi, list);
    EXPECT_NE(why.find(std::to_string(ma) + "." + std::to_string(mi)), std::string::npos) << why;
    EXPECT_NE(why.find("the oldest sm_75"), std::string::npos) << why;
    EXPECT_NE(why.find("-DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(ma * 10 + mi)),
              std::string::npos)
        << why;
  }
  // SASS alone: only the same major version, at or above its minor.
  EXPECT_EQ(unsupported_reason(8, 9, "80-real"), "");
  EXPECT_NE(unsupported_reason(9, 0, "80-real;86-real"), "") << "no PTX for a newer major";
  EXPECT_NE(unsupported_reason(8, 0, "86-real"), "") << "sm_86 SASS does not run on 8.0";
  EXPECT_EQ(unsupported_reason(9, 0, "80-real;80-virtual"), "") << "PTX is JIT-compiled upward";
  EXPECT_NE(unsupported_reason(7, 5, "80"), "") << "PTX is not compiled downward";
  EXPECT_EQ(unsupported_reason(9, 0, "90a-real"), "");
  EXPECT_NE(unsupported_reason(10, 0, "90a"), "") << "arch-specific code runs on 9.0 only";
  // Lists CMake resolves itself, or an emulation's empty list: not judged here.
  for (const char* l : {"native", "all", "all-major", ""})
    EXPECT_EQ(unsupported_reason(6, 1, l), "");
  // This build's own list is known; with the project's default list (not
  // native, all or a list of one's own) a Maxwell GPU is told apart.
  const std::string built(sy::cuda_impl::built_architectures());
  EXPECT_FALSE(built.empty());
  if (built.rfind("75-real,", 0) == 0) {
    EXPECT_NE(unsupported_reason(5, 2, built), "");
  }
  // Family code (NNf) runs within its major version only; arch-specific
  // PTX (NNa-virtual) on that compute capability only.
  EXPECT_EQ(unsupported_reason(10, 3, "100f"), "");
  EXPECT_NE(unsupported_reason(12, 0, "100f"), "")
      << "family PTX is not JIT-compiled across families";
  EXPECT_EQ(unsupported_reason(9, 0, "90a-virtual"), "");
  EXPECT_NE(unsupported_reason(10, 0, "90a-virtual"), "");
}

#endif  // SWITCHYARD_TEST_CUDA_EMU

TEST(Cuda, CachingAllocatorServesATrainingLoopFromItsCache) {
  SKIP_UNLESS_AVAILABLE(cuda_test_device());
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  std::vector<sy::Buffer> bufs;
  for (size_t n : {size_t(1000), size_t(1) << 20, size_t(5) << 20}) bufs.push_back(d.allocate(n));
  for (auto& b : bufs) d.release(b);
  bufs.clear();
  uint64_t allocs = d.counters().memory_allocations;
  for (int i = 0; i < 50; ++i) {
    for (size_t n : {size_t(1000), size_t(1) << 20, size_t(5) << 20}) bufs.push_back(d.allocate(n));
    for (auto& b : bufs) d.release(b);
    bufs.clear();
  }
  EXPECT_EQ(d.counters().memory_allocations, allocs)
      << "no cudaMalloc once the cache holds the sizes";
  EXPECT_GT(d.counters().bytes_reserved, 0u);
}

TEST(Cuda, GraphReplayFollowsNewBindingsAndParams) {
  SKIP_UNLESS_AVAILABLE(cuda_test_device());
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  // One Program (one id), run with alternating buffers and scalars: every
  // run must use its own, whether eager, captured or replayed.
  sy::Program p =
      one_launch(0x5eed0001, sy::Kernel::affine, sy::AffineParams{.n = 4096}, {4096 * 4, 4096 * 4});
  std::vector<float> x(4096), y(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  sy::Buffer in = d.allocate(x.size() * 4),
             out[2] = {d.allocate(x.size() * 4), d.allocate(x.size() * 4)};
  d.upload(in, 0, x.data(), x.size() * 4);
  uint64_t captures0 = d.counters().command_recordings;
  for (int run = 0; run < 12; ++run) {
    sy::Buffer o = out[run % 2];
    p.instrs[0].params = sy::AffineParams{.n = 4096, .scale = float(1 + run % 3), .shift = 0.5f};
    sy::Binding b[2] = {{o, 0}, {in, 0}};
    d.execute(p, b);
    d.download(o, 0, y.data(), y.size() * 4);
    d.synchronize();
    for (size_t i = 0; i < y.size(); i += 511)
      ASSERT_EQ(y[i], float(1 + run % 3) * x[i] + 0.5f) << "run " << run;
  }
  EXPECT_GT(d.counters().command_recordings, captures0) << "repeats were captured";
  for (sy::Buffer b : {in, out[0], out[1]}) d.release(b);
}

namespace {

// A Program of `n` affine launches over 4096 floats, each reading the last's
// output: out = in * scale + shift, n times.
sy::Program affine_chain(uint64_t id, int n, float scale, float shift) {
  sy::Program p;
  p.id = id;
  p.num_slots = 2;
  for (int i = 0; i < n; ++i) {
    sy::Instr ins;
    ins.kernel = sy::Kernel::affine;
    ins.nargs = 2;
    ins.args[0] = {0, 0, 4096 * 4};
    ins.args[1] = {uint32_t(i == 0 ? 1 : 0), 0, 4096 * 4};
    ins.params = sy::AffineParams{.n = 4096, .scale = scale, .shift = shift};
    p.instrs.push_back(ins);
  }
  return p;
}

bool graphs_on() {
  const char* g = std::getenv("SWITCHYARD_CUDA_GRAPHS");
  return !(g && std::string(g) == "0");
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string(v) == "1";
}

}  // namespace

TEST(Cuda, GraphsFollowALearningRateScheduleByUpdatingNotRecapturing) {
  SKIP_UNLESS_AVAILABLE(cuda_test_device());
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  if (!graphs_on()) GTEST_SKIP() << "graphs are off (SWITCHYARD_CUDA_GRAPHS=0)";
  std::vector<float> x(4096, 1.f), y(4096);
  sy::Buffer in = d.allocate(x.size() * 4), out = d.allocate(x.size() * 4);
  d.upload(in, 0, x.data(), x.size() * 4);
  const sy::Counters c0 = d.counters();
  const int runs = 12;
  for (int run = 0; run < runs; ++run) {
    // A new baked-in scalar every step (a learning rate was one, before
    // graphs read it from device memory): three launches of
    // out = out * 1 + shift.
    float shift = 0.25f * float(run + 1);
    sy::Program p = affine_chain(0x5eed0002, 3, 1.f, shift);
    sy::Binding b[2] = {{out, 0}, {in, 0}};
    d.execute(p, b);
    d.download(out, 0, y.data(), y.size() * 4);
    d.synchronize();
    ASSERT_EQ(y[0], 1.f + 3 * shift) << "run " << run;
    ASSERT_EQ(y[4095], 1.f + 3 * shift) << "run " << run;
  }
  const sy::Counters c1 = d.counters();
  uint64_t recordings = c1.command_recordings - c0.command_recordings;
  uint64_t updates = c1.command_updates - c0.command_updates;
  // Run 1 eager, every later one a graph launch: a new graph until the
  // Program has its few, then an update of one of them (before: no key ever
  // repeated, so every run was eager).
  EXPECT_EQ(c1.queue_submits - c0.queue_submits, uint64_t(3 + runs - 1))
      << "one launch per run after the first";
  EXPECT_EQ(recordings + updates, uint64_t(runs - 1));
  if (env_set("SY_EMU_FAIL_UPDATE")) {  // a driver refusing every update: a graph per step
    EXPECT_EQ(updates, 0u);
  } else {
    EXPECT_LE(recordings, 4u);
    EXPECT_GE(updates, uint64_t(runs - 5));
  }
  for (sy::Buffer b : {in, out}) d.release(b);
}

TEST(Cuda, MoreBindingSetsThanGraphsAreUpdatedIntoTheGraphsKept) {
  SKIP_UNLESS_AVAILABLE(cuda_test_device());
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  if (!graphs_on()) GTEST_SKIP() << "graphs are off (SWITCHYARD_CUDA_GRAPHS=0)";
  // Six output buffers in rotation, more than the graphs a Program keeps:
  // each run's addresses were last seen six runs ago.
  std::vector<float> x(4096), y(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 97);
  sy::Buffer in = d.allocate(x.size() * 4);
  std::vector<sy::Buffer> outs;
  for (int i = 0; i < 6; ++i) outs.push_back(d.allocate(x.size() * 4));
  d.upload(in, 0, x.data(), x.size() * 4);
  const sy::Counters c0 = d.counters();
  sy::Program p = affine_chain(0x5eed0003, 2, 2.f, 1.f);
  for (int run = 0; run < 30; ++run) {
    sy::Binding b[2] = {{outs[size_t(run % 6)], 0}, {in, 0}};
    d.execute(p, b);
    d.download(outs[size_t(run % 6)], 0, y.data(), y.size() * 4);
    d.synchronize();
    for (size_t i = 0; i < y.size(); i += 331)
      ASSERT_EQ(y[i], (x[i] * 2.f + 1.f) * 2.f + 1.f) << "run " << run << " element " << i;
  }
  const sy::Counters c1 = d.counters();
  if (!env_set("SY_EMU_FAIL_UPDATE")) {
    // The graphs kept are updated, not captured and instantiated anew.
    EXPECT_LE(c1.command_recordings - c0.command_recordings, 4u) << "captured every step";
    EXPECT_GE(c1.command_updates - c0.command_updates, 20u);
  }
  d.release(in);
  for (sy::Buffer b : outs) d.release(b);
}

TEST(Cuda, StagedUploadsPastTheInFlightLimitThenAKernel) {
  SKIP_UNLESS_AVAILABLE(cuda_test_device());
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  // 1,100 small uploads and no synchronize: past 1,024 staged transfers in
  // flight the backend polls their events, and a "not ready" answer must
  // not be reported by the next launch as that launch's failure.
  const int n = 1100;
  sy::Buffer buf = d.allocate(size_t(n) * 16), out = d.allocate(size_t(n) * 16);
  d.synchronize();
  for (int i = 0; i < n; ++i) {
    float v[4] = {float(i), float(i) + 0.5f, -float(i), 1.f};
    d.upload(buf, size_t(i) * 16, v, sizeof v);
  }
  sy::Program p = one_launch(0x5eed0004, sy::Kernel::affine,
                             sy::AffineParams{.n = int64_t(n) * 4, .scale = 2.f, .shift = 0.f},
                             {uint64_t(n) * 16, uint64_t(n) * 16});
  sy::Binding b[2] = {{out, 0}, {buf, 0}};
  d.execute(p, b);
  std::vector<float> y(size_t(n) * 4);
  d.download(out, 0, y.data(), y.size() * 4);
  d.synchronize();
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(y[size_t(i) * 4], 2.f * float(i)) << i;
    ASSERT_EQ(y[size_t(i) * 4 + 1], 2.f * float(i) + 1.f) << i;
  }
  d.release(buf);
  d.release(out);
}

// The device's compute capability (major), from its info.
int cc_major(sy::Device& dev) {
  int major = 0, minor = 0;
  for (const auto& [k, v] : dev.info().properties)
    if (k == "compute_capability") std::sscanf(v.c_str(), "%d.%d", &major, &minor);
  return major;
}

TEST(Cuda, GemmFollowsTheTf32Setting) {
  SKIP_UNLESS_AVAILABLE(cuda_test_device());
  sy::Device& dev = sy::device(cuda_test_device());
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  const bool tf32_env = env_set("SWITCHYARD_CUDA_TF32");
  EXPECT_EQ(sy::float32_matmul_precision(), tf32_env ? "high" : "highest");
  EXPECT_THROW(sy::set_float32_matmul_precision("tf32"), sy::Error);
  // TF32 where the device has it (compute capability 8.0 and up).
  const bool device_tf32 = cc_major(dev) >= 8;
  // 1 + 2^-12 is exact in FP32 and rounds to 1 in TF32 (10 mantissa bits):
  // the product shows which one the GEMM computed in, on whichever path
  // (cuBLASLt, or cublasGemmEx with SWITCHYARD_CUDA_GEMM=cublas).
  const float a = 1.f + 1.f / 4096.f;
  std::vector<float> A(16 * 16, 0.f), B(16 * 16, 0.f), C(16 * 16);
  for (int i = 0; i < 16; ++i)
    A[size_t(i) * 16 + size_t(i)] = a, B[size_t(i) * 16 + size_t(i)] = 1.f;
  sy::Buffer ba = d.allocate(A.size() * 4), bb = d.allocate(B.size() * 4),
             bc = d.allocate(C.size() * 4);
  d.upload(ba, 0, A.data(), A.size() * 4);
  d.upload(bb, 0, B.data(), B.size() * 4);
  sy::Program p = one_launch(0x5eed0005, sy::Kernel::gemm,
                             sy::GemmParams{.m = 16, .n = 16, .k = 16, .alpha = 1.f},
                             {16 * 16 * 4, 16 * 16 * 4, 16 * 16 * 4});
  sy::Binding b[3] = {{bc, 0}, {ba, 0}, {bb, 0}};
  // Each setting three times (eager, captured, replayed from a CUDA graph),
  // then back: a graph recorded under one setting is not replayed in the
  // other.
  for (const char* prec : {"highest", "high", "medium", "highest"}) {
    sy::set_float32_matmul_precision(prec);
    const bool tf32 = device_tf32 && std::string(prec) != "highest";
    for (int run = 0; run < 3; ++run) {
      d.execute(p, b);
      d.download(bc, 0, C.data(), C.size() * 4);
      d.synchronize();
#ifdef SWITCHYARD_TEST_CUDA_EMU
      EXPECT_EQ(C[0], tf32 ? 1.f : a)
          << prec << " run " << run << " on compute capability " << cc_major(dev);
#else
      // On a GPU, TF32 allowed is not forced (cuBLAS may pick an FP32
      // kernel); not allowed, it must not be used.
      if (tf32)
        EXPECT_TRUE(C[0] == 1.f || C[0] == a) << C[0];
      else
        EXPECT_EQ(C[0], a) << prec << ": TF32 not allowed but the GEMM used it";
#endif
      EXPECT_EQ(C[17], C[0]);
    }
  }
  sy::set_float32_matmul_precision(tf32_env ? "high" : "highest");
  for (sy::Buffer x : {ba, bb, bc}) d.release(x);
}

TEST(Cuda, GemmReadsBf16OnlyWhereTheDeviceHasIt) {
  SKIP_UNLESS_AVAILABLE(cuda_test_device());
  sy::Device& dev = sy::device(cuda_test_device());
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  EXPECT_TRUE(d.gemm_reads(sy::DType::f32));
  EXPECT_TRUE(d.gemm_reads(sy::DType::f16));
  EXPECT_EQ(d.gemm_reads(sy::DType::bf16), cc_major(dev) >= 8);
  EXPECT_FALSE(d.gemm_reads(sy::DType::i32));
  // Where it does not, bf16 matmuls still run: widened first, the same values.
  sy::manual_seed(7);
  const sy::Tensor x = sy::randn({5, 7}, sy::Options(dev).dtype(sy::bf16));
  const sy::Tensor w = sy::randn({7, 3}, sy::Options(dev).dtype(sy::bf16));
  const auto on_dev = sy::matmul(x, w).to_vector<float>();
  const auto on_cpu =
      sy::matmul(x.to(sy::device("cpu")), w.to(sy::device("cpu"))).to_vector<float>();
  ASSERT_EQ(on_dev.size(), on_cpu.size());
  for (size_t i = 0; i < on_dev.size(); ++i)  // one bf16 rounding apart at most
    EXPECT_NEAR(on_dev[i], on_cpu[i], 1e-2 * std::abs(on_cpu[i]) + 1e-3) << i;
}

TEST(Cuda, SoftmaxOfRowsWithMinusInfinityMatchesTheReference) {
  // Masked entries (-inf) add nothing to a row's sum, wherever they fall in
  // the single pass's running maximum (first in a lane's stride included),
  // on the warp-per-row path and the block-per-row one (long rows, few).
  SKIP_UNLESS_AVAILABLE(cuda_test_device());
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{37, 100}, {2, 3000}}) {
    std::vector<float> x = random_vec(size_t(rows * cols), 5, -4.f, 4.f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; c += (r % 3) + 2) x[size_t(r * cols + c)] = -INFINITY;
    const uint64_t bytes = uint64_t(rows * cols) * 4;
    sy::Buffer in = d.allocate(bytes), out = d.allocate(bytes);
    d.upload(in, 0, x.data(), bytes);
    for (bool log : {false, true}) {
      sy::Program p =
          one_launch(0x5eed0f01 + uint64_t(log), sy::Kernel::softmax,
                     sy::SoftmaxParams{.rows = rows, .cols = cols, .log = log}, {bytes, bytes});
      sy::Binding b[2] = {{out, 0}, {in, 0}};
      d.execute(p, b);
      std::vector<float> y(size_t(rows * cols));
      d.download(out, 0, y.data(), bytes);
      d.synchronize();
      for (int64_t r = 0; r < rows; ++r) {
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(x[size_t(r * cols + c)]));
        for (int64_t c = 0; c < cols; ++c) s += std::exp(double(x[size_t(r * cols + c)]) - m);
        for (int64_t c = 0; c < cols; ++c) {
          const double xv = x[size_t(r * cols + c)], got = y[size_t(r * cols + c)];
          const double want = log ? xv - m - std::log(s) : std::exp(xv - m) / s;
          if (std::isinf(want)) {
            ASSERT_EQ(got, want) << rows << "x" << cols << " row " << r << " col " << c;
          } else {
            ASSERT_NEAR(got, want, 1e-5 * std::max(1.0, std::abs(want)))
                << rows << "x" << cols << (log ? " log" : "") << " row " << r << " col " << c;
          }
        }
      }
    }
    d.release(in);
    d.release(out);
  }
}
