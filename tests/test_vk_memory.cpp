// SPDX-License-Identifier: MIT
// The Vulkan backend's memory decisions (backends/vulkan/vk_memory_policy.h)
// for the devices its users have and this machine does not: a discrete GPU
// with and without resizable BAR, an APU with a small device-local
// carve-out, a mobile GPU whose cached memory is non-coherent, and lavapipe.
// These check the policy as a function of the device's facts; the same
// profiles run the Vulkan suites end to end on lavapipe through
// SWITCHYARD_VK_SIMULATE (ctest's vulkan_sim:* entries). Also the pipeline
// cache's check of the driver header it hands the driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "switchyard/error.h"
#include "test_env.h"
#include "vk_device.h"
#include "vk_gemm.h"
#include "vk_instance.h"
#include "vk_launch.h"
#include "vk_memory_policy.h"
#include "vk_pipelines.h"

namespace vi = switchyard::vk_impl;
namespace sy = switchyard;

namespace {

constexpr VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                CACHED = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;

// lavapipe's facts as it reports them: a CPU device with one 2 GiB heap and
// one memory type that is everything.
vi::Physical lavapipe() {
  vi::Physical p;
  std::snprintf(p.props.deviceName, sizeof p.props.deviceName, "llvmpipe");
  p.props.deviceType = VK_PHYSICAL_DEVICE_TYPE_CPU;
  p.props.limits.nonCoherentAtomSize = 64;
  p.mem.memoryHeapCount = 1;
  p.mem.memoryHeaps[0] = {2ull << 30, VK_MEMORY_HEAP_DEVICE_LOCAL_BIT};
  p.mem.memoryTypeCount = 1;
  p.mem.memoryTypes[0] = {DL | HV | HC | CACHED, 0};
  for (uint32_t t = 0; t < VK_MAX_MEMORY_TYPES; ++t) p.real_type[t] = t;
  return p;
}

vi::Physical simulated(const char* profile) {
  vi::Physical p = lavapipe();
  vi::simulate(p, profile);
  return p;
}

struct Expect {
  bool zero_copy;
  int tensor, fallback, staging, table, status, pinned;
};

void expect_policy(const vi::Physical& p, bool force_staging, Expect e) {
  const vi::MemoryPolicy m = vi::choose_memory(p, force_staging);
  EXPECT_EQ(m.zero_copy, e.zero_copy);
  EXPECT_EQ(m.tensor, e.tensor) << "tensors";
  EXPECT_EQ(m.tensor_fallback, e.fallback) << "tensors past the budget";
  EXPECT_EQ(m.staging, e.staging) << "staging ring";
  EXPECT_EQ(m.table, e.table) << "launch table";
  EXPECT_EQ(m.status, e.status) << "status word";
  EXPECT_EQ(m.pinned, e.pinned) << "pinned host memory";
}

VkMemoryPropertyFlags flags(const vi::Physical& p, int t) {
  return p.mem.memoryTypes[t].propertyFlags;
}

}  // namespace

TEST(VulkanMemoryPolicy, LavapipeMapsTensorsAndForcedStagingDoesNot) {
  expect_policy(lavapipe(), false, {true, 0, -1, 0, 0, 0, 0});
  expect_policy(lavapipe(), true, {false, 0, -1, 0, 0, 0, 0});
}

// Without resizable BAR: tensors in VRAM the host cannot map, the ring in
// cached system memory, the launch table and the status word in the 256 MiB
// BAR window; past the VRAM budget, out-of-memory (no silent spill to system
// memory).
TEST(VulkanMemoryPolicy, DiscreteGpuStagesThroughCachedSystemMemory) {
  vi::Physical p = simulated("discrete");
  expect_policy(p, false, {false, 0, -1, 2, 3, 3, 2});
  EXPECT_FALSE(flags(p, 0) & HV);
  EXPECT_TRUE(flags(p, 2) & CACHED);
}

// With resizable BAR all of VRAM is host-visible, yet tensors are not mapped:
// a download would be an uncached read across PCIe. BAR memory holds only
// the launch table and the status word.
TEST(VulkanMemoryPolicy, ResizableBarIsNotZeroCopy) {
  vi::Physical p = simulated("discrete-rebar");
  expect_policy(p, false, {false, 0, -1, 3, 2, 2, 3});
  EXPECT_TRUE(flags(p, 2) & DL);
  EXPECT_TRUE(flags(p, 2) & HV);
  EXPECT_FALSE(flags(p, 3) & DL);
  // A driver that offers VRAM only as host-visible memory: tensors still go
  // there, unmapped, through the ring.
  vi::Physical q = p;
  const uint32_t no_plain_vram = 0b1110;
  EXPECT_EQ(vi::pick_memory(q, false, vi::MemRole::tensor, no_plain_vram), 2);
}

// An APU maps its tensors (device memory is system memory), in the
// device-local carve-out first, then in cached system memory past its
// budget; its device-local memory is not host-cached, so downloads go
// through the cached ring (checked end to end in test_gpu's simulated runs).
TEST(VulkanMemoryPolicy, ApuMapsTensorsAndFallsBackToSystemMemory) {
  vi::Physical p = simulated("apu");
  expect_policy(p, false, {true, 2, 3, 3, 2, 3, 3});
  EXPECT_FALSE(flags(p, 2) & CACHED);
  uint64_t ours[VK_MAX_MEMORY_HEAPS] = {}, budget[VK_MAX_MEMORY_HEAPS] = {};
  vi::query_budget(p, ours, budget);
  EXPECT_EQ(budget[0], 256ull << 20);
  EXPECT_EQ(budget[1], 12ull << 30);
}

// A mobile GPU's cached memory is non-coherent: chosen for tensors (the host
// reads them back fast) and used through flush and invalidate; pinned host
// memory must be coherent.
TEST(VulkanMemoryPolicy, MobileGpuUsesNonCoherentCachedMemory) {
  vi::Physical p = simulated("mobile");
  expect_policy(p, false, {true, 2, -1, 2, 1, 2, 1});
  EXPECT_FALSE(flags(p, 2) & HC);
  EXPECT_EQ(p.emulate_noncoherent, 1u << 2);
  EXPECT_EQ(p.props.limits.nonCoherentAtomSize, 256u);
  // Every simulated type is backed by the driver's one type.
  for (uint32_t t = 0; t < p.mem.memoryTypeCount; ++t) EXPECT_EQ(p.real_type[t], 0u);
}

// A discrete GPU whose heaps are all device-local and mappable is still not
// zero-copy; an integrated GPU whose mappable device-local heap is a small
// window beside a larger carve-out stages rather than live in the window.
TEST(VulkanMemoryPolicy, ZeroCopyOnlyWhereMappedMemoryIsTheDevicesMemory) {
  vi::Physical p = simulated("discrete-rebar");
  p.mem.memoryHeaps[1].flags = VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
  EXPECT_FALSE(vi::choose_memory(p, false).zero_copy);
  vi::Physical q = simulated("discrete");  // 8 GiB carve-out, 256 MiB window
  q.props.deviceType = VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  const vi::MemoryPolicy m = vi::choose_memory(q, false);
  EXPECT_FALSE(m.zero_copy);
  EXPECT_EQ(m.tensor, 0);
}

TEST(VulkanMemoryPolicy, BuffersOnlyGetTypesTheDriverAllows) {
  vi::Physical p = simulated("discrete");
  // Without system memory the ring falls back to the BAR window.
  EXPECT_EQ(vi::pick_memory(p, false, vi::MemRole::staging, 0b1001), 3);
  EXPECT_EQ(vi::pick_memory(p, false, vi::MemRole::staging, 0b0001), -1);
  // The fallback never lands in the tensor heap.
  vi::Physical a = simulated("apu");
  EXPECT_EQ(vi::pick_memory(a, true, vi::MemRole::tensor_fallback, 0b0101, 0), -1);
  EXPECT_EQ(vi::pick_memory(a, true, vi::MemRole::tensor_fallback, 0b0111, 0), 1);
}

TEST(VulkanMemoryPolicy, SimulationRefusesUnknownProfilesAndUnfitDrivers) {
  vi::Physical p = lavapipe();
  try {
    vi::simulate(p, "voodoo");
    ADD_FAILURE() << "no error";
  } catch (const switchyard::Error& e) {
    EXPECT_NE(std::string(e.what()).find("discrete-rebar"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("voodoo"), std::string::npos) << e.what();
  }
  vi::Physical q = lavapipe();
  q.mem.memoryTypes[0].propertyFlags = DL;  // nothing the host can map
  EXPECT_THROW(vi::simulate(q, "mobile"), switchyard::Error);
  EXPECT_EQ(vi::simulation_profiles().size(), 4u);
}

// The pipeline cache's driver header (vk_pipelines.h): data made by another
// vendor, device or driver build is never handed to this driver.
TEST(VulkanPipelineCache, ForeignDriverHeadersAreIgnored) {
  VkPhysicalDeviceProperties p{};
  p.vendorID = 0x10de;
  p.deviceID = 0x2684;
  for (int i = 0; i < int(VK_UUID_SIZE); ++i) p.pipelineCacheUUID[i] = uint8_t(i * 7 + 1);
  auto make = [&](uint32_t size, uint32_t version, uint32_t vendor, uint32_t device, bool uuid_ok,
                  size_t total) {
    std::string s(total, '\0');
    uint32_t w[4] = {size, version, vendor, device};
    std::memcpy(s.data(), w, std::min<size_t>(16, total));
    if (total >= 32) {
      std::memcpy(s.data() + 16, p.pipelineCacheUUID, VK_UUID_SIZE);
      if (!uuid_ok) s[20] ^= 0x40;
    }
    return s;
  };
  const uint32_t v1 = VK_PIPELINE_CACHE_HEADER_VERSION_ONE;
  EXPECT_EQ(vi::cache_header_mismatch(make(32, v1, 0x10de, 0x2684, true, 4096), p), "");
  EXPECT_EQ(vi::cache_header_mismatch(make(32, v1, 0x10de, 0x2684, true, 32), p), "");
  struct Bad {
    std::string data, says;
  };
  for (const Bad& b : {Bad{make(32, v1, 0x1002, 0x2684, true, 4096), "vendor:device 1002:2684"},
                       Bad{make(32, v1, 0x10de, 0x2204, true, 4096), "this device is 10de:2684"},
                       Bad{make(32, v1, 0x10de, 0x2684, false, 4096), "pipelineCacheUUID"},
                       Bad{make(32, 7, 0x10de, 0x2684, true, 4096), "version 1, found 7"},
                       Bad{make(16, v1, 0x10de, 0x2684, true, 4096), "header size"},
                       Bad{make(9000, v1, 0x10de, 0x2684, true, 4096), "header size"},
                       Bad{make(32, v1, 0x10de, 0x2684, true, 20), "32-byte driver header"},
                       Bad{std::string(), "found 0 bytes"}}) {
    std::string why = vi::cache_header_mismatch(b.data, p);
    EXPECT_NE(why.find(b.says), std::string::npos)
        << "expected '" << b.says << "', got '" << why << "'";
  }
}

// ---- queue family (vk_instance.h) -------------------------------------------------
// Which family each kind of device's queues are taken from, from the family
// lists their drivers report (flags, queue count, timestamp bits).
namespace {
constexpr VkQueueFlags G = VK_QUEUE_GRAPHICS_BIT, C = VK_QUEUE_COMPUTE_BIT,
                       T = VK_QUEUE_TRANSFER_BIT, SB = VK_QUEUE_SPARSE_BINDING_BIT,
                       VD = VK_QUEUE_VIDEO_DECODE_BIT_KHR;
VkQueueFamilyProperties family(VkQueueFlags f, uint32_t count, uint32_t ts = 64) {
  VkQueueFamilyProperties q{};
  q.queueFlags = f;
  q.queueCount = count;
  q.timestampValidBits = ts;
  return q;
}
uint32_t choose(const std::vector<VkQueueFamilyProperties>& q, std::string* why = nullptr) {
  std::string w;
  const uint32_t f = vi::choose_queue_family(q, w);
  if (why) *why = w;
  EXPECT_EQ(f == UINT32_MAX, !w.empty()) << w;
  return f;
}
}  // namespace

TEST(VulkanQueueFamily, AsyncComputeFamiliesAreChosenWhereThereAreAny) {
  unset_env("SWITCHYARD_VK_QUEUE_FAMILY");
  // NVIDIA: graphics, transfer-only, compute-only, video.
  EXPECT_EQ(choose({family(G | C | T | SB, 16), family(T | SB, 2), family(C | T | SB, 8),
                    family(VD, 1, 0)}),
            2u);
  // AMD (RADV): graphics, compute-only (the async-compute engines), video.
  EXPECT_EQ(choose({family(G | C | T | SB, 1), family(C | T | SB, 4), family(VD, 1, 0)}), 1u);
  // Intel Arc: the compute engine beside the render engine and a copy engine.
  EXPECT_EQ(choose({family(G | C | T, 1, 36), family(C | T, 1, 36), family(T, 1, 36)}), 1u);
  // One family for everything: lavapipe, older Intel, Mali, Apple.
  EXPECT_EQ(choose({family(G | C | T, 1)}), 0u);
  EXPECT_EQ(choose({family(G | C | T, 2), family(T, 1)}), 0u);
  // A compute-only family listed before the graphics one.
  EXPECT_EQ(choose({family(C, 1), family(G | C | T, 3)}), 0u);
}

TEST(VulkanQueueFamily, TimestampsBreakTiesAndNoComputeIsSaid) {
  unset_env("SWITCHYARD_VK_QUEUE_FAMILY");
  // Of two compute-only families, the one whose queues write timestamps.
  EXPECT_EQ(choose({family(G | C | T, 1), family(C | T, 2, 0), family(C | T, 2, 64)}), 2u);
  // A compute-only family without timestamps still beats graphics with them
  // (the profiler says it has no timings; every run gets the better queue).
  EXPECT_EQ(choose({family(G | C | T, 1, 64), family(C | T, 2, 0)}), 1u);
  EXPECT_EQ(choose({family(G | C | T, 1, 0), family(G | C | T, 1, 48)}), 1u);
  // A family that lists no queues is not one to take.
  EXPECT_EQ(choose({family(C | T, 0), family(G | C | T, 1)}), 1u);
  std::string why;
  EXPECT_EQ(choose({family(T, 1), family(VD, 1, 0)}, &why), UINT32_MAX);
  EXPECT_EQ(why, "no compute queue");
  EXPECT_EQ(choose({}, &why), UINT32_MAX);
}

TEST(VulkanQueueFamily, TheSettingNamesAFamilyOrSaysWhichItCould) {
  const std::vector<VkQueueFamilyProperties> nvidia = {family(G | C | T | SB, 16),
                                                       family(T | SB, 2), family(C | T | SB, 8)};
  set_env("SWITCHYARD_VK_QUEUE_FAMILY", "0");
  EXPECT_EQ(choose(nvidia), 0u);
  for (const char* bad :
       {"1", "3", "x", "-1", "+2", "2x", " 2", "4294967298", "99999999999999999999"}) {
    set_env("SWITCHYARD_VK_QUEUE_FAMILY", bad);
    std::string why;
    EXPECT_EQ(choose(nvidia, &why), UINT32_MAX) << bad;
    EXPECT_NE(why.find("expected the index of a family with compute queues (0, 2), found '" +
                       std::string(bad) + "'"),
              std::string::npos)
        << why;
  }
  unset_env("SWITCHYARD_VK_QUEUE_FAMILY");
}

// ---- launch geometry (vk_launch.h) ---------------------------------------------------
// How a GPU's reductions are laid out, from its LaunchConfig alone (the
// defaults are a GPU's: 256 invocations, 1024 workgroups to fill it, rows
// over 64 a workgroup's, no loop budget). Before, a cross-entropy loss was
// one workgroup whatever the batch, its backward and argmax one invocation
// per row (8 rows of 1000: one workgroup), and a bias gradient one
// invocation per column (128 columns: one workgroup for any batch).
namespace {
// A Program of one launch per params, planned; it owns what the launches
// point at (its instructions and the planner's parts).
struct Planned {
  sy::Program prog;
  std::vector<sy::Instr> parts;
  std::vector<vi::Launch> launches;
  std::vector<uint32_t> groups;  // each launch's workgroups in all
};
Planned plan(const vi::LaunchConfig& c, std::initializer_list<sy::KernelParams> ps) {
  Planned out;
  for (const sy::KernelParams& p : ps) {
    sy::Instr& ins = out.prog.instrs.emplace_back();
    ins.kernel = p.kernel();
    ins.nargs = uint8_t(sy::kernel_num_args(p.kernel()));
    ins.params = p;
  }
  vi::plan_launches(c, out.prog, out.launches, out.parts);
  for (const vi::Launch& l : out.launches) {
    uint32_t g[3] = {1, 1, 1};
    vi::launch_grid(c, *l.ins, l.extra_flags, l.aux, g);
    out.groups.push_back(g[0] * g[1] * g[2]);
  }
  return out;
}
Planned plan(const vi::LaunchConfig& c, const sy::KernelParams& p) { return plan(c, {p}); }
}  // namespace

TEST(VulkanLaunchGeometry, ReductionsSpreadOverAGpu) {
  vi::LaunchConfig c;
  c.device = "a simulated GPU";
  // The loss over a batch of 65536: a first pass over as many workgroups as
  // fill the device, partials in the scratch, then one workgroup adds them.
  Planned ce = plan(c, sy::CrossEntropyParams{.rows = 65536, .cols = 10});
  ASSERT_EQ(ce.launches.size(), 2u);
  EXPECT_EQ(ce.launches[0].extra_flags, vi::kPartials);
  EXPECT_EQ(ce.launches[1].extra_flags, vi::kFinish);
  EXPECT_EQ(ce.groups[0], 256u) << "65536 rows, one per invocation";
  EXPECT_EQ(ce.launches[0].aux, ce.groups[0]);
  EXPECT_EQ(ce.groups[1], 1u);
  EXPECT_NE(ce.launches[0].scratch, vi::kNoScratch);
  EXPECT_EQ(ce.launches[0].scratch, ce.launches[1].scratch);
  EXPECT_GE(ce.launches[0].scratch_bytes, 256u * 8);
  // A small batch stays one launch that writes the loss itself.
  EXPECT_EQ(plan(c, sy::CrossEntropyParams{.rows = 100, .cols = 10}).launches.size(), 1u);
  // Long rows: a workgroup each.
  EXPECT_EQ(plan(c, sy::CrossEntropyBackwardParams{.rows = 8, .cols = 1000}).groups[0], 8u);
  EXPECT_EQ(plan(c, sy::ArgmaxParams{.rows = 8, .cols = 1000}).groups[0], 8u);
  EXPECT_EQ(plan(c, sy::ArgmaxParams{.rows = 8, .cols = 10}).groups[0], 1u);
  // A bias gradient, 128 columns over a batch of 65536: len split so the
  // first pass has a workgroup per 256 (part, column) pairs, at least 32 of
  // them, each part no shorter than 64 rows; the second pass adds the parts.
  Planned bias = plan(c, sy::ReduceSumParams{.outer = 1, .len = 65536, .inner = 128, .scale = 1});
  ASSERT_EQ(bias.launches.size(), 2u);
  const uint32_t parts = bias.launches[0].aux;
  EXPECT_GE(parts, 64u);
  EXPECT_LE(parts, 65536u / 64);
  EXPECT_GE(bias.groups[0], 32u);
  EXPECT_EQ(bias.launches[0].scratch_bytes, uint64_t(parts) * 128 * 4);
  EXPECT_EQ(bias.groups[1], 1u) << "128 outputs";
  // One long row (a whole tensor's sum): parts of it over many workgroups.
  Planned total = plan(c, sy::ReduceSumParams{.outer = 1, .len = 1 << 24, .inner = 1, .scale = 1});
  ASSERT_EQ(total.launches.size(), 2u);
  EXPECT_GE(total.groups[0], 1024u);
  // Enough outputs to fill the device already: one pass.
  EXPECT_EQ(plan(c, sy::ReduceSumParams{.outer = 1, .len = 512, .inner = 1 << 20, .scale = 1})
                .launches.size(),
            1u);
  // Two split reductions in one Program get their own scratch regions.
  const sy::ReduceSumParams grad{.outer = 1, .len = 65536, .inner = 128, .scale = 1};
  const std::vector<vi::Launch> ls = plan(c, {grad, grad}).launches;
  ASSERT_EQ(ls.size(), 4u);
  EXPECT_GE(ls[2].scratch, ls[0].scratch + ls[0].scratch_bytes);
}

// A CPU driver's choices: rows of up to 4096 stay one invocation's (its
// barriers cost more than they save), and with a loop budget an
// invocation's row stays within a quarter of it.
TEST(VulkanLaunchGeometry, ACpuDriverKeepsRowsInOneInvocation) {
  vi::LaunchConfig c;
  c.short_row = 4096;
  c.fill_groups = 32;
  EXPECT_EQ(plan(c, sy::ArgmaxParams{.rows = 4096, .cols = 4096}).groups[0], 16u);
  EXPECT_EQ(plan(c, sy::ArgmaxParams{.rows = 4, .cols = 5000}).groups[0], 4u);
  Planned ce = plan(c, sy::CrossEntropyParams{.rows = 1 << 20, .cols = 10});
  EXPECT_EQ(ce.groups[0], 32u) << "no more workgroups than fill the device";
}

// Elementwise launches past maxStorageBufferRange are cut into parts that
// each fit one binding: a flat one along its elements (parts 16-element
// aligned), a broadcast binary along its outermost dimension whose slices
// fit, iterating the dimensions outside it.
TEST(VulkanLaunchGeometry, ElementwiseLaunchesPastTheStorageRangeAreSplit) {
  vi::LaunchConfig c;
  c.max_range = 1024;
  c.storage_align = 16;
  const Planned relu = plan(c, {sy::UnaryParams{.op = sy::Unary::relu, .n = 1000}});
  const std::vector<vi::Launch>& ls = relu.launches;
  ASSERT_EQ(ls.size(), 5u) << "1000 floats in parts of 240";
  int64_t total = 0;
  for (size_t k = 0; k < ls.size(); ++k) {
    const int64_t n = ls[k].ins->params.get<sy::UnaryParams>().n;
    EXPECT_EQ(ls[k].ins->args[0].offset, uint64_t(total) * 4);
    EXPECT_EQ(ls[k].ins->args[1].bytes, uint64_t(n) * 4);
    EXPECT_LE(ls[k].ins->args[1].bytes + c.storage_align + 16, c.max_range);
    total += n;
  }
  EXPECT_EQ(total, 1000);
  // out[17, 255] = a[17, 255] + a row vector: one row (1020 bytes) passes
  // the room, so each row is cut along its elements.
  const sy::BinaryParams bias{.op = sy::Binary::add,
                              .dims = {1, 1, 17, 255},
                              .a_strides = {0, 0, 255, 1},
                              .b_strides = {0, 0, 0, 1}};
  const Planned add = plan(c, {bias});
  ASSERT_EQ(add.launches.size(), 17u * 2) << "17 rows, each in two parts";
  const vi::Launch& l = add.launches[3];  // row 1, part 2
  const auto second = l.ins->params.get<sy::BinaryParams>();
  EXPECT_EQ(second.dims[2], 1);
  EXPECT_EQ(l.ins->args[0].offset, (255u + uint64_t(255 - second.dims[3])) * 4);
  EXPECT_EQ(l.ins->args[2].offset, uint64_t(255 - second.dims[3]) * 4) << "b: the row vector";
  // Within the limit: one launch.
  c.max_range = 1 << 20;
  EXPECT_EQ(plan(c, {bias}).launches.size(), 1u);
}

// A column sum whose input passes the range: len split into parts whose
// rows fit one binding, the first pass as launches over ranges of parts
// (each binding its rows and its parts' scratch slots), the second binding
// none of the input.
TEST(VulkanLaunchGeometry, SumsPastTheStorageRangeBindRangesOfParts) {
  vi::LaunchConfig c;
  c.max_range = 1024;
  c.storage_align = 16;
  const Planned sum =
      plan(c, {sy::ReduceSumParams{.outer = 1, .len = 1000, .inner = 3, .scale = 1}});
  const std::vector<vi::Launch>& ls = sum.launches;
  ASSERT_GE(ls.size(), 3u);
  const vi::Launch& finish = ls.back();
  EXPECT_EQ(finish.extra_flags, vi::kFinish);
  EXPECT_EQ(finish.ins->args[1].bytes, 16u);
  uint32_t parts_seen = 0;
  int64_t rows = 0;
  for (size_t k = 0; k + 1 < ls.size(); ++k) {
    const vi::Launch& l = ls[k];
    EXPECT_EQ(l.extra_flags, vi::kPartials);
    EXPECT_LE(l.ins->args[1].bytes + c.storage_align + 16, c.max_range);
    EXPECT_EQ(l.ins->args[1].offset, uint64_t(rows) * 12);
    EXPECT_EQ(l.scratch, finish.scratch + uint64_t(parts_seen) * 3 * 4);
    parts_seen += l.aux;
    rows += l.ins->params.get<sy::ReduceSumParams>().len;
  }
  EXPECT_EQ(parts_seen, finish.aux);
  EXPECT_EQ(rows, 1000);
}

// Multi-tensor Adam past the storage range on a device whose storage
// buffers align to 64 bytes (Intel, Adreno): a tensor cut into chunks of a
// binding's room has chunks that start off the alignment, so a chunk's
// window reaches below it; each window must still fit maxStorageBufferRange
// and start aligned, and each table entry must point at its argument. An
// empty tensor's entry covers no element. (Before, windows were held to the
// chunks' room, and the second chunk could not be placed: an internal error.)
TEST(VulkanLaunchGeometry, MultiTensorChunksFitAlignedWindows) {
  vi::LaunchConfig c;
  c.device = "a simulated GPU";
  c.max_range = 1024;
  c.storage_align = 64;
  std::vector<vi::Block> blocks(1);
  blocks[0].size = 1 << 16;
  // Tensor 0: 1000 floats; tensor 1: empty. p, m, v, step, g in one block.
  const uint64_t at[2][5] = {{0, 4096, 8192, 12288, 16384}, {20480, 20544, 20608, 20672, 20736}};
  const uint64_t bytes[2][5] = {{4000, 4000, 4000, 8, 4000}, {0, 0, 0, 8, 0}};
  std::vector<vi::Alloc> allocs;
  allocs.reserve(10);
  std::vector<sy::Binding> bind;
  sy::Program prog;
  for (int t = 0; t < 2; ++t)
    for (int k = 0; k < 5; ++k) {
      allocs.push_back(
          {.block = 0, .offset = at[t][k], .size = std::max<uint64_t>(bytes[t][k], 4)});
      bind.push_back({sy::Buffer{&allocs.back(), allocs.back().size}, 0});
    }
  // more_args: p, m, v, step of each tensor, then each g.
  for (int t = 0; t < 2; ++t)
    for (int k = 0; k < 4; ++k) prog.more_args.push_back({uint32_t(5 * t + k), 0, bytes[t][k]});
  for (int t = 0; t < 2; ++t) prog.more_args.push_back({uint32_t(5 * t + 4), 0, bytes[t][4]});
  sy::Instr& ins = prog.instrs.emplace_back();
  ins.kernel = sy::Kernel::adam_multi;
  ins.params = sy::AdamMultiParams{.tensors = 2, .lr = 0.001f};
  ins.nmore = uint32_t(prog.more_args.size());
  std::vector<vi::Launch> launches(1), tmp;
  launches[0].ins = &prog.instrs[0];
  ASSERT_NO_THROW(vi::plan_multi(c, blocks, prog, bind, launches, tmp));
  uint64_t covered = 0, empty = 0;
  for (const vi::Launch& l : launches) {
    if (l.extra_flags == vi::kFinish) continue;
    vi::MultiEntry table[vi::kMaxMultiTensors];
    VkDescriptorBufferInfo desc[vi::kArgBindings];
    vi::Range ranges[vi::kMultiWindows];
    int nranges = 0;
    ASSERT_NO_THROW(vi::multi_params(c, blocks, prog, l, bind, table, desc, ranges, nranges));
    for (int j = 0; j < nranges; ++j) {
      EXPECT_EQ(desc[j].offset % c.storage_align, 0u);
      EXPECT_LE(desc[j].range, c.max_range);
    }
    for (uint32_t i = 0; i < l.count; ++i) {
      const vi::MultiEntry& e = table[i];
      const uint64_t p_at = desc[e.windows & 7].offset + uint64_t(e.off[0]) * 4;
      const uint64_t g_at = desc[(e.windows >> 12) & 7].offset + uint64_t(e.off_g) * 4;
      if (e.n == 0) {
        ++empty;
        EXPECT_EQ(p_at, at[1][0]);
        continue;
      }
      EXPECT_EQ(p_at, covered * 4) << "chunk " << i << " of tensor 0's p";
      EXPECT_EQ(g_at, at[0][4] + covered * 4) << "chunk " << i << " of tensor 0's g";
      EXPECT_LE(p_at + e.n * 4, desc[e.windows & 7].offset + desc[e.windows & 7].range);
      covered += e.n;
    }
  }
  EXPECT_EQ(covered, 1000u);
  EXPECT_EQ(empty, 1u);
}

// sgd_multi's layout (p, buf of each tensor, then each g) through the same
// windows: every written and read argument found where it lies. With no
// range limit all three tensors' arguments share one window: the launch
// is specialized to read binding 0 (kOneWindow), and to take vec4s
// (kMultiVec4) only while every argument starts on 16 bytes.
TEST(VulkanLaunchGeometry, MultiTensorSgdFindsEachArgumentAndItsWindow) {
  for (uint64_t g_shift : {0u, 4u}) {  // the last gradient 16-byte aligned, or not
    SCOPED_TRACE(g_shift);
    vi::LaunchConfig c;
    c.device = "a simulated GPU";
    c.storage_align = 16;
    std::vector<vi::Block> blocks(1);
    blocks[0].size = 1 << 16;
    const int64_t T = 3;
    const uint64_t n[T] = {10, 1000, 3};
    std::vector<vi::Alloc> allocs;
    allocs.reserve(3 * T);
    std::vector<sy::Binding> bind;
    uint64_t at[T][3];  // p, buf, g
    for (int64_t t = 0; t < T; ++t)
      for (int k = 0; k < 3; ++k) {
        at[t][k] = uint64_t(4096 * (3 * t + k)) + (t == T - 1 && k == 2 ? g_shift : 0);
        allocs.push_back({.block = 0, .offset = at[t][k], .size = n[t] * 4});
        bind.push_back({sy::Buffer{&allocs.back(), allocs.back().size}, 0});
      }
    sy::Program prog;
    for (int64_t t = 0; t < T; ++t)
      for (int k = 0; k < 2; ++k) prog.more_args.push_back({uint32_t(3 * t + k), 0, n[t] * 4});
    for (int64_t t = 0; t < T; ++t) prog.more_args.push_back({uint32_t(3 * t + 2), 0, n[t] * 4});
    sy::Instr& ins = prog.instrs.emplace_back();
    ins.kernel = sy::Kernel::sgd_multi;
    ins.params = sy::SgdMultiParams{.tensors = T, .has_buf = true, .lr = 0.1f, .momentum = 0.9f};
    ins.nmore = uint32_t(prog.more_args.size());
    std::vector<vi::Launch> launches(1), tmp;
    launches[0].ins = &prog.instrs[0];
    ASSERT_NO_THROW(vi::plan_multi(c, blocks, prog, bind, launches, tmp));
    ASSERT_EQ(launches.size(), 1u) << "one launch, no step-count pass";
    vi::MultiEntry table[vi::kMaxMultiTensors];
    VkDescriptorBufferInfo desc[vi::kArgBindings];
    vi::Range ranges[vi::kMultiWindows];
    int nranges = 0;
    vi::OpParams o{};
    ASSERT_NO_THROW(
        o = vi::multi_params(c, blocks, prog, launches[0], bind, table, desc, ranges, nranges));
    EXPECT_EQ(nranges, 1);
    EXPECT_NE(o.flags & vi::kOneWindow, 0u);
    EXPECT_EQ((o.flags & vi::kMultiVec4) != 0, g_shift == 0);
    EXPECT_EQ(o.off[0], uint32_t(T));
    for (int64_t t = 0; t < T; ++t) {
      const vi::MultiEntry& e = table[t];
      EXPECT_EQ(e.n, n[t]);
      auto where = [&](int field, uint32_t off) {
        return desc[(e.windows >> (3 * field)) & 7].offset + uint64_t(off) * 4;
      };
      EXPECT_EQ(where(0, e.off[0]), at[t][0]) << "tensor " << t << "'s p";
      EXPECT_EQ(where(1, e.off[1]), at[t][1]) << "tensor " << t << "'s buf";
      EXPECT_EQ(where(4, e.off_g), at[t][2]) << "tensor " << t << "'s g";
    }
  }
}

// ---- GEMM variants (backends/vulkan/vk_gemm.h) -----------------------------------
// The variant each vendor's facts pick for the bundled models' shapes: the
// large tiles for big products on GPUs whose register files hold them,
// split-K where a product's tiles cannot fill the device, the CPU driver's
// own tiles and no split on lavapipe.
namespace {
vi::LaunchConfig gpu(uint32_t vendor, uint32_t units, bool integrated = false,
                     uint32_t device_id = 0) {
  vi::LaunchConfig c;
  c.device = "a simulated GPU";
  vi::GpuFacts f;
  f.vendor = vendor;
  f.device_id = device_id;
  f.compute_units = units;
  f.integrated = integrated;
  vi::configure_gemm(c, f);
  return c;
}
sy::GemmParams gemm(int64_t m, int64_t n, int64_t k, bool ta = false, bool tb = false) {
  return sy::GemmParams{.m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb, .alpha = 1};
}
// The MLP's three products at batch 128: Y = X W^T, dX = dY W, dW = dY^T X.
const sy::GemmParams kMlpForward = gemm(128, 256, 784, false, true);
const sy::GemmParams kMlpInputGrad = gemm(128, 784, 256);
const sy::GemmParams kMlpWeightGrad = gemm(256, 784, 128, true, false);
const sy::GemmParams kSquare2048 = gemm(2048, 2048, 2048);
}  // namespace

TEST(VulkanGemmVariant, AnNvidiaGpuTakesLargeTilesAndSplitsSmallProducts) {
  const vi::LaunchConfig h100 = gpu(0x10DE, 132);
  EXPECT_TRUE(h100.large_tiles);
  EXPECT_TRUE(h100.gemm_prefetch);
  vi::GemmChoice big = vi::choose_gemm(h100, kSquare2048);
  EXPECT_EQ(big.set, vi::kLargeSet) << vi::describe(h100, big);
  EXPECT_EQ(big.splits, 1u) << "256 tiles fill 132 SMs twice";
  // 8 workgroups of 64x64 on 132 SMs before: now small tiles in many parts of K.
  for (const sy::GemmParams& g : {kMlpForward, kMlpInputGrad, kMlpWeightGrad}) {
    const vi::GemmChoice ch = vi::choose_gemm(h100, g);
    EXPECT_GT(ch.splits, 1u) << g.m << "x" << g.n << "x" << g.k << ": " << vi::describe(h100, ch);
    const auto& t = vi::gemm_tiles(h100, vi::gemm_flags(h100, ch));
    const uint64_t groups =
        vi::ceil_div(uint64_t(g.m), t[0]) * vi::ceil_div(uint64_t(g.n), t[1]) * ch.splits;
    EXPECT_GE(groups, 132u) << "every SM busy: " << vi::describe(h100, ch);
    // Parts of at least 4 BK steps, and the partials within the scratch.
    EXPECT_GE(uint64_t(g.k) / ch.splits, 4 * uint64_t(t[2]) - t[2]);
    EXPECT_LE(uint64_t(g.m * g.n) * ch.splits * 4, h100.scratch_bytes);
  }
  EXPECT_EQ(vi::choose_gemm(h100, kMlpForward).set, vi::kSmallSet);
  // 1024^3: 64 large tiles leave half the SMs idle; split in two or more.
  EXPECT_GT(vi::choose_gemm(h100, gemm(1024, 1024, 1024)).splits, 1u);
  // Batched products fill it without a split.
  sy::GemmParams batched = gemm(256, 256, 256);
  batched.batch = 64;
  EXPECT_EQ(vi::choose_gemm(h100, batched).splits, 1u);
  // The flags: the set and the prefetching loop.
  EXPECT_EQ(vi::gemm_flags(h100, big), vi::kLargeTiles | vi::kGemmPrefetch);
}

TEST(VulkanGemmVariant, AmdIntelAndMobileGpusGetTheirOwn) {
  // An RDNA3 card (96 CUs, from VK_AMD_shader_core_properties2).
  const vi::LaunchConfig rdna = gpu(0x1002, 96);
  EXPECT_EQ(vi::choose_gemm(rdna, kSquare2048).set, vi::kLargeSet);
  EXPECT_GT(vi::choose_gemm(rdna, kMlpForward).splits, 1u);
  // An Arc A770, its 32 Xe cores from the table: no large tiles (64
  // accumulators per lane would spill its GRF), medium ones fill it.
  EXPECT_EQ(vi::known_compute_units(0x8086, 0x56A0), 32u);
  const vi::LaunchConfig arc = gpu(0x8086, vi::known_compute_units(0x8086, 0x56A0));
  EXPECT_FALSE(arc.large_tiles);
  const vi::GemmChoice arc_big = vi::choose_gemm(arc, kSquare2048);
  EXPECT_EQ(arc_big.set, vi::kMediumSet);
  EXPECT_EQ(arc_big.splits, 1u);
  EXPECT_GT(vi::choose_gemm(arc, kMlpForward).splits, 1u);
  // A Mali with 16 shader cores (VK_ARM_shader_core_builtins) and an
  // Adreno whose count nobody reports (guessed: 8): small register files,
  // half the resident workgroups, a 4 MiB scratch.
  for (const vi::LaunchConfig& m : {gpu(0x13B5, 16, true), gpu(0x5143, 0, true)}) {
    EXPECT_FALSE(m.large_tiles);
    EXPECT_EQ(m.gemm_resident[0], 2u);
    EXPECT_EQ(m.scratch_bytes, 4ull << 20);
    EXPECT_EQ(vi::choose_gemm(m, kSquare2048).splits, 1u);
    EXPECT_NE(vi::choose_gemm(m, kSquare2048).set, vi::kLargeSet);
  }
  EXPECT_EQ(gpu(0x5143, 0, true).compute_units, 8u);
  EXPECT_EQ(vi::known_compute_units(0x10DE, 0x2330), 132u);
  EXPECT_EQ(vi::known_compute_units(0x10DE, 0x1234), 0u);
}

TEST(VulkanGemmVariant, ACpuDriverKeepsItsTilesAndNeverSplits) {
  vi::LaunchConfig c;  // lavapipe's sets, as choose_tiles makes them
  c.gemm = {128, 128, 16, 32, 8};
  c.gemm_small = {64, 64, 16, 16, 8};
  vi::GpuFacts f;
  f.cpu_like = true;
  vi::configure_gemm(c, f);
  EXPECT_EQ(c.compute_units, 0u);
  EXPECT_FALSE(c.gemm_prefetch);
  for (const sy::GemmParams& g : {kMlpForward, kMlpInputGrad, kSquare2048}) {
    const vi::GemmChoice ch = vi::choose_gemm(c, g);
    EXPECT_EQ(ch.set, vi::kMediumSet);
    EXPECT_EQ(ch.splits, 1u);
    EXPECT_EQ(vi::gemm_flags(c, ch), 0u);
  }
  EXPECT_EQ(vi::choose_gemm(c, gemm(100, 100, 100)).set, vi::kSmallSet) << "one tile";
  // Forced: SWITCHYARD_VK_GEMM_SPLIT_K=3 splits K into 3 where it can...
  c.gemm_forced_splits = 3;
  EXPECT_EQ(vi::choose_gemm(c, kMlpForward).splits, 3u);
  EXPECT_EQ(vi::choose_gemm(c, gemm(64, 64, 16)).splits, 1u) << "one BK step";
  // ... and as many more as the loop budget asks for.
  c.loop_budget = 2048;
  const int64_t kp = vi::gemm_k_part(c);
  ASSERT_GT(kp, 0);
  EXPECT_GE(vi::choose_gemm(c, gemm(64, 64, 8 * kp)).splits, 8u);
}

// A split GEMM's plan: a first pass of every part of every product into the
// scratch, then a second that adds them; a GEMM past one binding is cut
// into blocks instead (no split-K).
TEST(VulkanGemmVariant, SplitKIsTwoPassesThroughTheScratch) {
  vi::LaunchConfig c = gpu(0x10DE, 132);
  sy::GemmParams g = kMlpForward;
  g.has_bias = true;
  g.act = sy::Unary::relu;
  const vi::GemmChoice ch = vi::choose_gemm(c, g);
  ASSERT_GT(ch.splits, 1u);
  Planned p = plan(c, g);
  ASSERT_EQ(p.launches.size(), 2u);
  const uint32_t fl = vi::gemm_flags(c, ch);
  EXPECT_EQ(p.launches[0].extra_flags, fl | vi::kPartials);
  EXPECT_EQ(p.launches[1].extra_flags, fl | vi::kFinish);
  EXPECT_EQ(p.launches[0].aux, ch.splits);
  EXPECT_EQ(p.launches[0].scratch, p.launches[1].scratch);
  EXPECT_EQ(p.launches[0].scratch_bytes, 128u * 256 * 4 * ch.splits);
  uint32_t g0[3], g1[3];
  vi::launch_grid(c, *p.launches[0].ins, p.launches[0].extra_flags, ch.splits, g0);
  EXPECT_EQ(g0[2], ch.splits) << "z: parts x products";
  vi::launch_grid(c, *p.launches[1].ins, p.launches[1].extra_flags, ch.splits, g1);
  EXPECT_EQ(g1[1] * g1[2], 1u);
  EXPECT_GE(uint64_t(g1[0]) * 64, 128u * 256 / 4) << "the outputs over a grid-stride loop";
  // Past one binding: blocks, no split.
  c.max_range = 64 * 1024;
  c.storage_align = 16;
  const Planned blocks = plan(c, g);
  EXPECT_GT(blocks.launches.size(), 2u);
  for (const vi::Launch& l : blocks.launches) EXPECT_EQ(l.extra_flags & vi::kPartials, 0u);
}

// `switchyard tune`'s file: read back only for the device and driver it
// was made on, a line that does not parse skipped; its entries taken over
// the model for exactly their shapes, where they still fit the device.
TEST(VulkanGemmVariant, TunedEntriesAreReadForTheirDriverAndTakenOverTheModel) {
  vi::Physical p = lavapipe();
  p.props.vendorID = 0x10005;
  p.props.deviceID = 0;
  p.props.driverVersion = 0x5800005;
  const std::string path = ::testing::TempDir() + "sy_gemm_tuning_test.txt";
  auto write = [&](const std::string& device_line, const std::string& body) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "switchyard vulkan gemm tuning 1\n%s\n%s", device_line.c_str(), body.c_str());
    std::fclose(f);
  };
  const std::string mine = "device 00010005 00000000 05800005 " + std::string(32, '0');
  write(
      mine,
      "gemm 128 784 256 1 0 0 1 2\nnot a line\ngemm 5 5 5 1 0 0 9 1\ngemm 128 256 784 1 0 1 0 1\n");
  const std::vector<vi::LaunchConfig::Tuned> t = vi::load_tuning(p, path);
  ASSERT_EQ(t.size(), 2u) << "the unparsable line and the unknown set skipped";
  EXPECT_EQ(t[0].m, 128);
  EXPECT_EQ(t[0].n, 784);
  EXPECT_EQ(t[0].set, uint32_t(vi::kSmallSet));
  EXPECT_EQ(t[0].splits, 2u);
  EXPECT_TRUE(t[1].tb);
  // Another driver version's file: not read.
  write("device 00010005 00000000 05800006 " + std::string(32, '0'),
        "gemm 128 784 256 1 0 0 1 2\n");
  EXPECT_TRUE(vi::load_tuning(p, path).empty());
  EXPECT_TRUE(vi::load_tuning(p, path + ".absent").empty());
  std::remove(path.c_str());

  vi::LaunchConfig c;  // lavapipe's sets
  c.gemm = {128, 128, 16, 32, 8};
  c.gemm_small = {64, 64, 16, 16, 8};
  c.tuned = {{128, 784, 256, 1, false, false, vi::kSmallSet, 2},
             {128, 256, 784, 1, false, true, vi::kLargeSet, 1}};
  const vi::GemmChoice tuned = vi::choose_gemm(c, kMlpInputGrad);
  EXPECT_EQ(tuned.set, vi::kSmallSet);
  EXPECT_EQ(tuned.splits, 2u);
  EXPECT_EQ(vi::choose_gemm(c, kMlpForward).set, vi::kMediumSet)
      << "no large tiles on this device: the entry is ignored";
  EXPECT_EQ(vi::choose_gemm(c, kMlpWeightGrad).splits, 1u) << "not tuned: the rule";
  // The candidates a tuning run times: both sets, whole and split.
  const std::vector<vi::GemmChoice> cands = vi::gemm_candidates(c, kMlpInputGrad);
  EXPECT_GE(cands.size(), 8u);
  EXPECT_EQ(cands.front().splits, 1u);
  EXPECT_TRUE(std::any_of(cands.begin(), cands.end(),
                          [](const vi::GemmChoice& x) { return x.set == vi::kSmallSet; }));
}
