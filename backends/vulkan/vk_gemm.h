// SPDX-License-Identifier: MIT
// The GEMM variant for a shape on a device: which tile set (large, medium,
// small), whether the GPU loop prefetches, and into how many parts K is
// split (split-K: partial sums in the scratch, added in a fixed order by a
// second pass). A pure function of (M, N, K, batch) and the device's facts
// in LaunchConfig, so tests pin the choice for simulated NVIDIA, AMD,
// Intel, Mali and Adreno devices; docs/vulkan.md ("GEMM variants") gives
// the model and its constants.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "vk_launch.h"

namespace switchyard::vk_impl {

// What the choice knows of a device (vk_context.cpp fills it from the
// driver; tests make them up).
struct GpuFacts {
  bool cpu_like = false;  // VK_PHYSICAL_DEVICE_TYPE_CPU (llvmpipe, SwiftShader)
  bool integrated = false;
  uint32_t vendor = 0, device_id = 0;
  // SMs, CUs, Xe cores, shader cores (0: unknown, then guessed).
  uint32_t compute_units = 0;
  uint32_t max_invocations = 256;  // per workgroup, along x
  uint32_t shared_bytes = 32768;
};

// The compute units of devices whose drivers do not say (no
// VK_NV_shader_sm_builtins, VK_AMD_shader_core_properties or
// VK_ARM_shader_core_builtins): a table of known devices, 0 when unknown.
uint32_t known_compute_units(uint32_t vendor, uint32_t device_id);
// A guess from the vendor and type when nothing says: a discrete GPU 32,
// anything else 8 (`switchyard tune` times the variants instead).
uint32_t guessed_compute_units(const GpuFacts& f);

// The tile sets and the device's facts in `c`: CPU drivers keep their
// register-blocked sets and never split K; GPUs get 4x4 in 64x64 (medium),
// 4x4 in 32x32 (small), and 8x8 in 128x128 (large) where the vendor's
// register file holds 64 accumulators per invocation at full occupancy
// (NVIDIA, AMD, Apple; not Intel's GRF or mobile GPUs), with the prefetching
// loop.
void configure_gemm(LaunchConfig& c, const GpuFacts& f);

enum GemmSet : uint32_t { kMediumSet = 0, kSmallSet = 1, kLargeSet = 2 };
struct GemmChoice {
  GemmSet set = kMediumSet;
  uint32_t splits = 1;  // parts of K (1: one launch)
};
// The variant for one GEMM. GPUs: the (set, splits) of least modeled time,
// where a launch runs in rounds of compute_units x resident workgroups, a
// round costs as much as a full one (a lone workgroup hides no latency),
// and a split pays a second launch and the partials' traffic. CPU drivers:
// the medium set, or the small one when the medium leaves a single tile.
// Splits only where the GEMM fits one binding per operand, the partials fit
// the scratch and one binding, and each part fits the loop budget.
// SWITCHYARD_VK_GEMM_VARIANT and SWITCHYARD_VK_GEMM_SPLIT_K (in `c`) force
// either; else a tuned entry for exactly this shape (c.tuned) is taken
// where it still fits the device.
GemmChoice choose_gemm(const LaunchConfig& c, const GemmParams& g);
// Every variant worth timing for this GEMM on this device (`switchyard
// tune`): each tile set it has, whole and in 2, 3, 4, 6, 8 ... parts of K
// where it can split.
std::vector<GemmChoice> gemm_candidates(const LaunchConfig& c, const GemmParams& g);
// The launch flags of a choice (kSmallTiles, kLargeTiles, kGemmPrefetch).
uint32_t gemm_flags(const LaunchConfig& c, GemmChoice ch);
// The tile set a GEMM launch with these flags runs on.
const std::array<uint32_t, 5>& gemm_tiles(const LaunchConfig& c, uint32_t flags);
// "large 128x128x16 (8x8), 4 parts of K" for messages and the profile.
std::string describe(const LaunchConfig& c, GemmChoice ch);

}  // namespace switchyard::vk_impl
