// SPDX-License-Identifier: MIT
// The CUDA backend. Some checks run everywhere it is built: its caching
// allocator (driven by malloc here), loading cuBLAS/cuBLASLt by dlopen, and
// the reason it gives when no GPU or driver is present. The rest need a CUDA
// device and are skipped, with the reason, where there is none (failed where
// SWITCHYARD_REQUIRE_CUDA=1). The GPU suites (test_gpu, test_conformance,
// test_grad, test_ops) also run on cuda:0.
#include <cstdlib>
#include <map>
#include <random>

#include "cuda_allocator.h"
#include "cuda_blas.h"
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
    EXPECT_NE(api.cublasSgemm_v2, nullptr);
    EXPECT_GT(api.cublasLtGetVersion(), 0u);
    std::printf("cuBLAS: %s, cuBLASLt %zu: %s\n", api.cublas_path.c_str(), api.cublasLtGetVersion(),
                api.lt_path.c_str());
  } catch (const sy::Error& e) {
    GTEST_SKIP() << "no cuBLAS on this machine: " << e.what();
  }
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
  for (const char* k : {"compute_capability", "sms", "driver", "runtime", "cublaslt"})
    EXPECT_FALSE(device_property(d, k).empty()) << k;
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
  sy::Program p;
  p.id = 0x5eed0001;
  p.num_slots = 2;
  sy::Instr ins;
  ins.kernel = sy::Kernel::affine;
  ins.nargs = 2;
  ins.args[0] = {0, 0, 4096 * 4};
  ins.args[1] = {1, 0, 4096 * 4};
  ins.params = sy::AffineParams{.n = 4096};
  p.instrs = {ins};
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
