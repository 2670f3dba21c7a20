// SPDX-License-Identifier: MIT
// The Vulkan backend's own checks: device facts, how `auto` treats a
// CPU-type Vulkan device, and settings read from the environment. The checks
// every GPU backend shares (one submission per step, out-of-memory, large
// transfers, bad labels, pinned memory, training parity) are in test_gpu.cpp.
// ctest runs these under the validation layer, zero-copy and forced-staging.
#include <cstdlib>

#include "helpers.h"
#include "switchyard/profile.h"
#include "trainer.h"

// The first Vulkan device, or skip with the reason (a failure where
// SWITCHYARD_REQUIRE_VULKAN=1, as ctest sets where the backend is built).
#define VULKAN_OR_SKIP(d)            \
  SKIP_UNLESS_AVAILABLE("vulkan:0"); \
  sy::BackendDevice& d = sy::backend_device("vulkan:0")

TEST(Vulkan, DeviceReportsItsProperties) {
  VULKAN_OR_SKIP(d);
  EXPECT_EQ(d.str(), "vulkan:0");
  EXPECT_FALSE(d.info().name.empty());
  EXPECT_GT(d.info().memory_bytes, 0u);
  for (const char* k :
       {"vendor", "driver", "api", "heaps", "subgroup", "max_storage_buffer", "memory"})
    EXPECT_FALSE(device_property(d, k).empty()) << k;
  const char* staging = std::getenv("SWITCHYARD_VK_FORCE_STAGING");
  if (staging && std::string(staging) == "1") {
    EXPECT_EQ(device_property(d, "memory").rfind("staging: ", 0), 0u)
        << device_property(d, "memory");
  }
}

TEST(Vulkan, AutoNeverPicksACpuTypeDevice) {
  VULKAN_OR_SKIP(d);
  bool gpu = false;
  for (auto* x : sy::devices())
    if ((x->info().backend == "vulkan" || x->info().backend == "cuda") &&
        x->info().type != sy::DeviceType::cpu)
      gpu = true;
  if (d.info().type == sy::DeviceType::cpu && !gpu) {
    EXPECT_EQ(sy::backend_device("auto").str(), "cpu");
  }
  EXPECT_EQ(&sy::backend_device("vulkan"), &d) << "a CPU-type device can still be named";
}

TEST(Vulkan, ABadSettingFailsEveryUseWithTheSameMessage) {
  VULKAN_OR_SKIP(d);
  // Checked in a child process: the setting is read when the device is first used.
  if (const char* name = std::getenv("SY_TEST_CHILD")) {
    for (int i = 0; i < 2; ++i)
      expect_error([&] { (void)(sy::ones({4}, d) + 1.f).to_vector<float>(); }, {name, "expected"});
    return;
  }
  for (const char* bad : {"SWITCHYARD_VK_GEMM_TILE=1,2,3", "SWITCHYARD_VK_GEMM_VARIANT=huge",
                          "SWITCHYARD_VK_GEMM_SPLIT_K=0", "SWITCHYARD_VK_GEMM_SPLIT_K=65"}) {
    const std::string name = std::string(bad).substr(0, std::string(bad).find('='));
    std::string cmd =
        "SY_TEST_CHILD=" + name + " " + bad + " " + ::testing::internal::GetArgvs()[0] +
        " --gtest_filter=Vulkan.ABadSettingFailsEveryUseWithTheSameMessage > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "the child's checks failed: run " << cmd;
  }
}

// Mesa's llvmpipe ends a shader invocation's loops after 65535 iterations in
// all, without an error: a GEMM with K above about 15,000 came out wrong
// there. The backend splits such GEMMs along K (parts accumulate in C; the
// bias goes in once, the activation at the end), splits reductions in two
// passes through a scratch buffer (column sums and row sums along their
// length, cross-entropy by rows), and refuses other launches whose loops
// would run past the budget, naming the kernel. Checked on this device's own
// budget, and in a child with a small budget (SWITCHYARD_VK_LOOP_BUDGET) so
// every split path runs on small sizes. Sizes: `col` rows summed down three
// columns, one row of `row` summed, a cross-entropy over `ce` rows, an
// argmax over rows of `arg`, and a softmax row of `refused` (0: none), too
// long for any split.
struct LongLoops {
  int64_t k, col, row, ce, arg, refused;
};
static void check_loop_budget(sy::BackendDevice& d, const LongLoops& n) {
  auto close = [](const sy::Tensor& got, const sy::Tensor& want, const char* what) {
    auto g = got.to(sy::cpu()).to_vector<float>(), w = want.to_vector<float>();
    ASSERT_EQ(g.size(), w.size()) << what;
    float scale = 0;
    for (float v : w) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_NEAR(g[i], w[i], 1e-5f * scale + 1e-6f) << what << " at " << i;
  };
  sy::manual_seed(7);
  const int64_t long_k = n.k;
  // linear: Y = X W^T + b through the fused GEMM, then relu; X^T G, the
  // shape of a weight gradient (K = the batch); a batched product.
  sy::Tensor x = sy::randn({5, long_k}), w = sy::randn({7, long_k}), b = sy::randn({7});
  close(sy::relu(sy::linear(x.to(d), w.to(d), b.to(d))), sy::relu(sy::linear(x, w, b)),
        "relu(linear)");
  sy::Tensor xt = sy::randn({long_k, 6}), g = sy::randn({long_k, 3});
  close(sy::matmul(xt.to(d), g.to(d), true, false), sy::matmul(xt, g, true, false), "X^T G");
  sy::Tensor a3 = sy::randn({2, 4, long_k}), b3 = sy::randn({2, long_k, 5});
  close(sy::bmm(a3.to(d), b3.to(d)), sy::bmm(a3, b3), "bmm");
  // Reductions too long for one invocation's loops (each was refused
  // before they were split).
  sy::Tensor col = sy::rand({n.col, 3});
  close(sy::sum(col.to(d), 0), sy::sum(col, 0), "column sums");
  sy::Tensor row = sy::rand({1, n.row});
  close(sy::sum(row.to(d), 1), sy::sum(row, 1), "row sum");
  std::vector<int32_t> lab(static_cast<size_t>(n.ce));
  for (size_t i = 0; i < lab.size(); ++i) lab[i] = int32_t(i * 7 % 10);
  sy::Tensor logits = sy::randn({n.ce, 10}), labels = sy::from_vector(lab, {n.ce});
  close(sy::cross_entropy(logits.to(d), labels.to(d)), sy::cross_entropy(logits, labels),
        "cross_entropy");
  sy::Tensor scores = sy::randn({3, n.arg});
  EXPECT_EQ(sy::argmax(scores.to(d), 1).to(sy::cpu()).to_vector<int32_t>(),
            sy::argmax(scores, 1).to_vector<int32_t>());
  if (n.refused > 0) {
    sy::Tensor wide = sy::rand({1, n.refused});
    expect_error([&] { (void)sy::softmax(wide.to(d), 1).to_vector<float>(); },
                 {"softmax", "loop iterations", d.str(), "split the tensor"});
    EXPECT_THROW((void)sy::softmax(wide.to(d), 1).to_vector<float>(), sy::DeviceLimit);
  }
  // The device goes on working.
  close(sy::sum(sy::ones({100, 3}, d), 0), sy::full({3}, 100.f), "sum after");
  // The profiler counts a split GEMM once, as the Program has it.
  namespace prof = sy::profile;
  prof::clear();
  prof::set_enabled(true);
  const uint64_t before = d.counters().launches_by_kernel[size_t(sy::Kernel::gemm)];
  close(sy::matmul(xt.to(d), g.to(d), true, false), sy::matmul(xt, g, true, false), "profiled");
  d.synchronize();
  const uint64_t launched = d.counters().launches_by_kernel[size_t(sy::Kernel::gemm)] - before;
  uint64_t events = 0;
  for (const prof::Event& e : prof::events())
    events += e.track == prof::Track::kernel && e.device == d.str() && e.name == "gemm";
  prof::set_enabled(false);
  prof::clear();
  EXPECT_EQ(launched, 1u);
  EXPECT_EQ(events, launched) << "one kernel event per launch";
}

TEST(Vulkan, LongLoopsAreSplitOrRefusedNeverCutShort) {
  VULKAN_OR_SKIP(d);
  if (std::getenv("SY_TEST_CHILD")) {
    // Parts of K = 336 (gemm_k_part in vk_launch.cpp); a budget of 3072
    // iterations per invocation, where llvmpipe's is 49152.
    check_loop_budget(d, {1000, 5000, 1 << 20, 50000, 200000, 300000});
    return;
  }
  const bool llvmpipe = d.info().name.rfind("llvmpipe", 0) == 0;
  check_loop_budget(d, {40000, 70000, 1 << 22, 700000, 100000, llvmpipe ? 4500000 : 0});
  std::string cmd =
      std::string("SY_TEST_CHILD=1 SWITCHYARD_VK_LOOP_BUDGET=4096 ") +
      ::testing::internal::GetArgvs()[0] +
      " --gtest_filter=Vulkan.LongLoopsAreSplitOrRefusedNeverCutShort > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "the child's checks failed: run " << cmd;
}

// ---- memory policy (vk_memory_policy.h) ----------------------------------------------
// ctest runs these with SWITCHYARD_VK_SIMULATE set to each profile
// (vulkan_sim:* entries): lavapipe then makes the decisions of a discrete
// GPU with and without resizable BAR, an APU and a mobile GPU, and runs them.

namespace {
std::string simulated_profile() {
  const char* e = std::getenv("SWITCHYARD_VK_SIMULATE");
  return e ? e : "";
}
}  // namespace

TEST(Vulkan, MemoryFollowsTheDevicesPolicy) {
  VULKAN_OR_SKIP(d);
  const std::string sim = simulated_profile(), mem = device_property(d, "memory");
  const char* forced = std::getenv("SWITCHYARD_VK_FORCE_STAGING");
  // Discrete GPUs stage; CPU drivers and integrated GPUs map (other kinds
  // depend on their heaps: vk_memory_policy.cpp).
  const auto type = d.info().type;
  if ((forced && std::string(forced) == "1") || type == sy::DeviceType::discrete_gpu) {
    EXPECT_EQ(mem.rfind("staging: ", 0), 0u) << mem;
  } else if (type == sy::DeviceType::cpu || type == sy::DeviceType::integrated_gpu) {
    EXPECT_EQ(mem.rfind("zero-copy: ", 0), 0u) << mem;
  }
  if (!sim.empty()) {
    EXPECT_EQ(sim.rfind("discrete", 0) == 0, type == sy::DeviceType::discrete_gpu);
  }
  if (!sim.empty()) {
    EXPECT_NE(mem.find("simulated: " + sim + " ("), std::string::npos) << mem;
  }
  // A few training steps and an evaluation: the host never reads
  // transferred data from memory it does not cache (an APU's uncached
  // device-local tensors are read through the cached ring), and the
  // simulated mobile GPU's non-coherent memory is flushed and invalidated.
  const sy::Counters c0 = d.counters();
  sy::models::TrainConfig cfg;
  cfg.device = d.str();
  cfg.epochs = 1;
  cfg.limit = 128 * 4;
  cfg.test_limit = 256;
  auto r = sy::models::train_fashion_mnist(cfg);
  EXPECT_GT(r.test_acc, 0.3);
  const sy::Counters c1 = d.counters();
  EXPECT_EQ(c1.uncached_host_reads - c0.uncached_host_reads, 0u);
  if (sim == "mobile") {
    EXPECT_GT(c1.memory_flushes - c0.memory_flushes, 0u);
    EXPECT_GT(c1.memory_invalidates - c0.memory_invalidates, 0u);
  } else if (!sim.empty()) {
    EXPECT_EQ(c1.memory_flushes - c0.memory_flushes, 0u) << "coherent memory needs no flush";
  }
}

// The device writes a buffer, then the host writes 4 bytes inside it and
// reads all of it back. On non-coherent memory (the mobile profile emulates
// it strictly: the host writes a shadow copy) the host must invalidate the
// atoms it writes partially, or its flush would put stale bytes over the
// device's; and invalidate before reading, or it would read stale bytes.
TEST(Vulkan, PartialHostWritesKeepTheDevicesBytes) {
  VULKAN_OR_SKIP(d);
  const size_t n = 4096;
  sy::Buffer a = d.allocate(n), b = d.allocate(n);
  std::vector<unsigned char> first(n, 0x11), second(n, 0x22), back(n);
  d.upload(b, 0, first.data(), n);
  d.upload(a, 0, second.data(), n);
  d.copy(a, 0, b, 0, n);  // the device writes b
  const uint32_t word = 0x33333333;
  d.upload(b, 100, &word, sizeof word);  // inside the first atom
  d.download(b, 0, back.data(), n);
  d.synchronize();
  std::vector<unsigned char> want(second);
  std::fill_n(want.begin() + 100, sizeof word, 0x33);
  EXPECT_EQ(back, want);
  d.release(a);
  d.release(b);
}

// An APU's device-local carve-out (256 MiB in the profile) fills up; later
// tensors go to system memory and compute as before.
TEST(Vulkan, TensorsPastTheHeapBudgetGoToTheFallbackHeap) {
  VULKAN_OR_SKIP(d);
  if (simulated_profile() != "apu")
    GTEST_SKIP() << "runs with SWITCHYARD_VK_SIMULATE=apu (ctest vulkan_sim:apu)";
  const uint64_t f0 = d.counters().fallback_blocks;
  const int64_t len = int64_t(10) << 20;  // 40 MiB each, 320 MiB in all
  std::vector<sy::Tensor> ts;
  for (int i = 0; i < 8; ++i) ts.push_back(sy::full({len}, float(i + 1), d) * 2.f);
  for (int i = 0; i < 8; ++i) {
    const float m = sy::mean(ts[i]).item();
    EXPECT_NEAR(m, 2.f * float(i + 1), 1e-4) << "tensor " << i;
  }
  EXPECT_GT(d.counters().fallback_blocks - f0, 0u);
}

// Run by the ctest entry vulkan:pipeline_cache_saved_after_warmup in a
// process of its own, with SWITCHYARD_VK_PIPELINE_CACHE naming a fresh file:
// the cache reaches the disk once a Program's pipelines are made, before the
// process exits (a run killed later keeps what it compiled).
TEST(Vulkan, DISABLED_PipelineCacheIsSavedAfterWarmup) {
  const char* path = std::getenv("SWITCHYARD_VK_PIPELINE_CACHE");
  ASSERT_TRUE(path && *path) << "run with SWITCHYARD_VK_PIPELINE_CACHE set";
  std::remove(path);
  VULKAN_OR_SKIP(d);
  sy::Tensor x = sy::from_vector(std::vector<float>{1, 2, 3, 4}, {4}).to(d);
  EXPECT_EQ((x * 2.f + 1.f).to_vector<float>(), (std::vector<float>{3, 5, 7, 9}));
  FILE* f = std::fopen(path, "rb");
  ASSERT_NE(f, nullptr) << path << " not written after the first Program";
  char magic[9] = {};
  EXPECT_EQ(std::fread(magic, 1, 8, f), 8u);
  std::fclose(f);
  EXPECT_STREQ(magic, "SYVKPC01");
}

// Tensors past maxStorageBufferRange (128 MiB on lavapipe and many mobile
// GPUs): launches are split into parts whose arguments each fit in one
// binding, so a 512 MiB tensor is filled, added to, put through a relu,
// given a bias, summed whole and along its columns, put through a softmax
// and a cross-entropy loss, and multiplied by a matrix on lavapipe (each
// was a DeviceLimit error before). Kernels that do not split (transpose,
// pooling, convolution's) still refuse such tensors, naming the limit.
// ctest's vulkan_variants:small_storage_range* run the conformance cases
// with limits of 1, 8 and 32 KiB too.
TEST(Vulkan, KernelsSplitTensorsPastTheStorageRange) {
  VULKAN_OR_SKIP(d);
  if (!simulated_profile().empty())  // 1.5 GiB of tensors: not on a simulated device's heaps
    GTEST_SKIP() << "run on the device's own memory only (the split does not depend on it)";
  double limit_mib = 0;  // `switchyard devices`' max_storage_buffer: "128.00 MiB", "4.00 GiB"
  for (auto& [k, v] : d.info().properties)
    if (k == "max_storage_buffer")
      limit_mib = std::stod(v) * (v.find("GiB") != std::string::npos ? 1024 : 1);
  if (limit_mib <= 0 || limit_mib > 256)
    GTEST_SKIP() << d.str() << " binds " << limit_mib << " MiB: 512 MiB is not past its limit";
  const int64_t n = 128ll << 20;  // 512 MiB of f32
  // Three such tensors fill most of lavapipe's 2 GiB heap: one op at a time.
  sy::Tensor a = sy::full({n}, 1.5f, d), b = sy::full({n}, 0.25f, d);
  sy::Tensor y = a + b;
  std::vector<float> got = y.to(sy::cpu()).to_vector<float>();
  ASSERT_EQ(got.size(), size_t(n));
  size_t wrong = 0;
  for (float v : got) wrong += v != 1.75f;
  EXPECT_EQ(wrong, 0u) << "elements not 1.75 of " << n;
  b = y = sy::Tensor();
  y = sy::relu(a);
  got = y.to(sy::cpu()).to_vector<float>();
  wrong = 0;
  for (float v : got) wrong += v != 1.5f;
  EXPECT_EQ(wrong, 0u) << "elements not 1.5 of " << n;
  got.clear();
  got.shrink_to_fit();
  y = sy::Tensor();
  // A bias added along the rows of a [2^20, 128] tensor (a broadcast binary).
  sy::Tensor bias = sy::arange(128, d);
  sy::Tensor z = a.reshape({n / 128, 128}) + bias;
  std::vector<float> rows = z.to(sy::cpu()).to_vector<float>();
  wrong = 0;
  for (size_t i = 0; i < rows.size(); i += 4093) wrong += rows[i] != 1.5f + float(i % 128);
  EXPECT_EQ(wrong, 0u);
  rows.clear();
  rows.shrink_to_fit();
  z = sy::Tensor();
  // Sums over it: the first pass of the split reduction as launches over
  // ranges of parts. 1.5 * 2^27 and 1.5 * 2^20 are exact in float, and so
  // is every partial sum on the way.
  EXPECT_EQ(sy::sum(a).item(), 1.5f * float(n));
  std::vector<float> cols = sy::sum(a.reshape({n / 128, 128}), 0).to(sy::cpu()).to_vector<float>();
  ASSERT_EQ(cols.size(), 128u);
  for (float v : cols) EXPECT_EQ(v, 1.5f * float(n / 128));
  // Row kernels as blocks of rows: a softmax of equal logits is exactly
  // 1/1024 everywhere, their cross-entropy log(1024) (the loss's first
  // pass as launches over blocks, one finish over all their partials).
  sy::Tensor logits = a.reshape({n / 1024, 1024});
  std::vector<float> probs = sy::softmax(logits, 1).to(sy::cpu()).to_vector<float>();
  wrong = 0;
  for (float v : probs) wrong += v != 1.f / 1024;
  EXPECT_EQ(wrong, 0u) << "softmax entries not 1/1024 of " << n;
  probs.clear();
  probs.shrink_to_fit();
  sy::Tensor labels = sy::zeros({n / 1024}, sy::Options(sy::DType::i32).device(d));
  EXPECT_NEAR(sy::cross_entropy(logits, labels).item(), std::log(1024.0), 1e-4);
  // A GEMM whose A is 512 MiB: blocks of rows, each bound as its own range.
  sy::Tensor w = sy::full({1024, 8}, 0.25f, d);
  std::vector<float> prod = sy::matmul(logits, w).to(sy::cpu()).to_vector<float>();
  ASSERT_EQ(prod.size(), size_t(n / 1024 * 8));
  wrong = 0;
  for (float v : prod) wrong += v != 384.f;  // 1.5 * 0.25 * 1024, exact
  EXPECT_EQ(wrong, 0u) << "products not 384 of " << prod.size();
  // Kernels that do not split refuse it, naming the limit.
  expect_error([&] { (void)sy::transpose(logits).to_vector<float>(); },
               {"transpose", "maxStorageBufferRange", d.str()});
}

// Sums whose input passes maxStorageBufferRange, on random data against the
// CPU, in a child with a 4 KiB limit (SWITCHYARD_VK_MAX_RANGE): a whole
// tensor's sum and a row's (row mode), column sums (a bias gradient's
// shape), short row sums and sums over a middle dimension.
TEST(Vulkan, SumsPastTheStorageRangeMatchTheCpu) {
  VULKAN_OR_SKIP(d);
  if (!std::getenv("SY_TEST_CHILD")) {
    std::string cmd = std::string("SY_TEST_CHILD=1 SWITCHYARD_VK_MAX_RANGE=4096 ") +
                      ::testing::internal::GetArgvs()[0] +
                      " --gtest_filter=Vulkan.SumsPastTheStorageRangeMatchTheCpu > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "the child's checks failed: run " << cmd;
    return;
  }
  sy::manual_seed(11);
  auto close = [](const sy::Tensor& got, const sy::Tensor& want, const char* what) {
    auto g = got.to(sy::cpu()).to_vector<float>(), w = want.to_vector<float>();
    ASSERT_EQ(g.size(), w.size()) << what;
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_NEAR(g[i], w[i], 1e-4f * (1 + std::abs(w[i]))) << what << " at " << i;
  };
  sy::Tensor row = sy::randn({1, 50000}), cols = sy::randn({3000, 7});
  close(sy::sum(row.to(d)), sy::sum(row), "whole sum");
  close(sy::sum(row.to(d), 1), sy::sum(row, 1), "row sum");
  close(sy::sum(cols.to(d), 0), sy::sum(cols, 0), "column sums");
  // outer > 1: blocks of outer indices (rows of 7), or each index alone
  // split along len when its slice (5000 x 2) passes the limit.
  sy::Tensor mid = sy::randn({3, 5000, 2});
  close(sy::sum(cols.to(d), 1), sy::sum(cols, 1), "row sums of 7");
  close(sy::sum(mid.to(d), 1), sy::sum(mid, 1), "sums over a middle dimension");
}

// Running out of descriptor sets (a driver with no memory for another pool,
// or SWITCHYARD_VK_MAX_DESCRIPTOR_SETS, here 64) evicts the least recently
// run recordings, which give their sets back, instead of failing: 60
// Programs of a few launches each (two frames of sets per Program) all run
// and stay right. A Program needing more sets than the budget holds is an
// OutOfMemory error naming them, and the device keeps working. In a child,
// so the budget is its own.
TEST(Vulkan, RunningOutOfDescriptorSetsEvictsOldRecordings) {
  VULKAN_OR_SKIP(d);
  if (!std::getenv("SY_TEST_CHILD")) {
    std::string cmd = std::string("SY_TEST_CHILD=1 SWITCHYARD_VK_MAX_DESCRIPTOR_SETS=64 ") +
                      ::testing::internal::GetArgvs()[0] +
                      " --gtest_filter=Vulkan.RunningOutOfDescriptorSetsEvictsOldRecordings "
                      "> /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "the child's checks failed: run " << cmd;
    return;
  }
  const uint64_t e0 = d.counters().recording_evictions;
  for (int round = 0; round < 2; ++round)
    for (int64_t i = 1; i <= 60; ++i) {  // a Program per length
      std::vector<float> y = sy::relu(sy::full({i}, -1.f, d) * 2.f + 3.f).to_vector<float>();
      ASSERT_EQ(y.size(), size_t(i));
      for (float v : y) ASSERT_EQ(v, 1.f) << "length " << i << ", round " << round;
    }
  EXPECT_GT(d.counters().recording_evictions - e0, 0u) << "64 sets held every recording";
  // A Program of 40 launches, run 3 times: its two frames cannot both hold
  // sets, so each run takes the other frame's.
  for (int run = 0; run < 3; ++run) {
    sy::Tensor w = sy::full({8}, 0.f, d);
    for (int k = 0; k < 40; ++k) w = w + 1.f;
    EXPECT_EQ(w.to_vector<float>(), std::vector<float>(8, 40.f)) << "run " << run;
  }
  sy::Tensor x = sy::full({8}, 0.f, d);
  for (int k = 0; k < 100; ++k) x = x + 1.f;  // one Program of 100 launches
  expect_error([&] { (void)x.to_vector<float>(); },
               {"descriptor sets", "SWITCHYARD_VK_MAX_DESCRIPTOR_SETS", d.str()});
  EXPECT_EQ((sy::full({3}, 2.f, d) * 2.f).to_vector<float>(), std::vector<float>(3, 4.f));
}
