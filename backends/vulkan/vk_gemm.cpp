// SPDX-License-Identifier: MIT
// The GEMM variant choice (vk_gemm.h): tile sets per device, and per shape
// the set and the parts of K of least modeled time.
#include "vk_gemm.h"

#include <algorithm>
#include <cmath>

#include "switchyard/error.h"

namespace switchyard::vk_impl {
namespace {

constexpr uint32_t kNvidia = 0x10DE, kAmd = 0x1002, kIntel = 0x8086, kApple = 0x106B;

// The model's constants, in units of one compute unit's multiply-add at
// full rate (about 1/150 ns on a current GPU's SM or CU):
// - each set's multiply-adds per unit at full occupancy: the large set
//   loads 2 vec4s from shared memory per 64 multiply-adds, the medium and
//   small sets 2 per 16, and the small set has a quarter of the
//   invocations per barrier;
constexpr double kRate[3] = {0.7, 0.5, 1.0};  // medium, small, large
// - a split's second launch (a dependent dispatch and its barrier, about
//   a microsecond);
constexpr double kLaunch = 131072;
// - an element of the partials written and read once, spread over the
//   compute units (a GPU moves a byte in the time of about 6 multiply-adds).
constexpr double kElement = 24;
// Each part of K at least this many BK steps (a part's prologue and its
// output tile cost about as much as a few steps).
constexpr uint64_t kMinSteps = 4;
constexpr uint32_t kMaxSplits = 64;

// The splits S really makes: parts of ceil(ceil(K/S)/BK)*BK (the shader's),
// none empty.
uint64_t parts_for(uint64_t K, uint64_t S, uint64_t BK) {
  const uint64_t kp = ceil_div(ceil_div(K, S), BK) * BK;
  return std::max<uint64_t>(1, ceil_div(K, kp));
}

const std::array<uint32_t, 5>& set_tiles(const LaunchConfig& c, GemmSet s) {
  return s == kLargeSet ? c.gemm_large : s == kSmallSet ? c.gemm_small : c.gemm;
}

// Whether the device has set s: the large one where configure_gemm gave it,
// the small one where it differs from the medium.
bool usable(const LaunchConfig& c, GemmSet s) {
  return (s != kLargeSet || c.large_tiles) && (s != kSmallSet || c.gemm_small != c.gemm);
}

// The most parts this GEMM may take: within the scratch and one binding,
// the dispatch's z, the loop budget's part (every part must fit it: at
// least ceil(K / k_part) parts, else none) and K's BK steps.
struct SplitRoom {
  uint64_t least = 1, most = 1;
};
SplitRoom split_room(const LaunchConfig& c, const GemmParams& g, uint64_t BK) {
  SplitRoom r;
  const uint64_t M = nonneg(g.m), N = nonneg(g.n), K = nonneg(g.k);
  const uint64_t B = std::max<uint64_t>(1, nonneg(g.batch));
  if (M == 0 || N == 0 || K < 2 * BK || !gemm_fits_bindings(c, g, g.has_bias)) return r;
  const uint64_t out = M * N * B * sizeof(float);
  uint64_t most = c.scratch_bytes / out;
  if (const uint64_t room = binding_room(c)) most = std::min(most, room / out);
  most = std::min<uint64_t>({most, kMaxGroups / B, ceil_div(K, BK), kMaxSplits});
  if (const int64_t kp = gemm_k_part(c); kp > 0) r.least = ceil_div(K, uint64_t(kp));
  if (most >= r.least)
    r.most = most;
  else
    r.least = 1;  // cannot split within the budget: split_gemm's serial parts
  return r;
}

// Modeled time of `s` with S parts of K (S as parts_for makes them).
double cost(const LaunchConfig& c, const GemmParams& g, GemmSet s, uint64_t S) {
  const auto& t = set_tiles(c, s);
  const uint64_t M = nonneg(g.m), N = nonneg(g.n), K = nonneg(g.k);
  const uint64_t B = std::max<uint64_t>(1, nonneg(g.batch));
  const uint64_t kp = ceil_div(ceil_div(K, S), t[2]) * t[2];
  const uint64_t tiles = ceil_div(M, t[0]) * ceil_div(N, t[1]) * B;
  const uint64_t resident = std::max<uint32_t>(1, c.gemm_resident[s]);
  const uint64_t rounds = ceil_div(tiles * S, uint64_t(c.compute_units) * resident);
  const double round = double(resident) * double(t[0] * t[1] * kp) / kRate[s];
  double total = double(rounds) * round;
  if (S > 1) total += kLaunch + double(M * N * B) * double(2 * S + 1) * kElement / c.compute_units;
  return total;
}

}  // namespace

uint32_t known_compute_units(uint32_t vendor, uint32_t device_id) {
  struct Known {
    uint32_t vendor, device, units;
  };
  // Devices whose drivers may not report it (NVIDIA's and AMD's do, through
  // their extensions; this is the fallback): SMs, CUs, Xe cores.
  static constexpr Known table[] = {
      {kNvidia, 0x2330, 132},  // H100 SXM5
      {kNvidia, 0x2331, 114},  // H100 PCIe
      {kNvidia, 0x2335, 132},  // H200
      {kNvidia, 0x20B0, 108},  // A100 SXM4 40 GB
      {kNvidia, 0x20B2, 108},  // A100 SXM4 80 GB
      {kNvidia, 0x2236, 72},   // A10
      {kNvidia, 0x27B8, 58},   // L4
      {kNvidia, 0x1EB8, 40},   // T4
      {kNvidia, 0x2684, 128},  // RTX 4090
      {kNvidia, 0x2204, 82},   // RTX 3090
      {kIntel, 0x56A0, 32},    // Arc A770
      {kIntel, 0x56A1, 28},    // Arc A750
      {kIntel, 0x56A5, 8},     // Arc A380
      {kIntel, 0x9A49, 6},     // Iris Xe (Tiger Lake, 96 EUs)
  };
  for (const Known& k : table)
    if (k.vendor == vendor && k.device == device_id) return k.units;
  return 0;
}

uint32_t guessed_compute_units(const GpuFacts& f) { return f.integrated ? 8 : 32; }

void configure_gemm(LaunchConfig& c, const GpuFacts& f) {
  if (f.cpu_like) {
    c.compute_units = 0;
    c.large_tiles = c.gemm_prefetch = false;
    return;
  }
  c.compute_units = f.compute_units ? f.compute_units : guessed_compute_units(f);
  c.gemm_prefetch = true;
  c.gemm_large = {128, 128, 16, 8, 8};
  const uint32_t wg = (c.gemm_large[0] / c.gemm_large[3]) * (c.gemm_large[1] / c.gemm_large[4]);
  const bool big_registers = f.vendor == kNvidia || f.vendor == kAmd || f.vendor == kApple;
  c.large_tiles = big_registers && f.max_invocations >= wg &&
                  4 * c.gemm_large[2] * (c.gemm_large[0] + c.gemm_large[1]) <= f.shared_bytes;
  // Resident workgroups per compute unit: about 1024 invocations at once
  // (a current SM or CU holds 1536-2048; the large set's 64 accumulators
  // halve it); a mobile GPU's core about half as many.
  const bool mobile = f.integrated && !(f.vendor == kAmd || f.vendor == kIntel ||
                                        f.vendor == kApple || f.vendor == kNvidia);
  c.gemm_resident = mobile ? std::array<uint32_t, 3>{2, 4, 1} : std::array<uint32_t, 3>{4, 8, 2};
  // A discrete GPU's split-K partials: 32 MiB of scratch (the 1024^3
  // product in 4 parts is 16 MiB), allocated once, when first needed.
  if (!f.integrated) c.scratch_bytes = std::max<uint64_t>(c.scratch_bytes, 32ull << 20);
}

GemmChoice choose_gemm(const LaunchConfig& c, const GemmParams& g) {
  GemmChoice best;
  const uint64_t M = nonneg(g.m), N = nonneg(g.n), K = nonneg(g.k);
  // A CPU driver's rule: the medium set, the small one for a product the
  // medium leaves in one tile (per product: a batch's products are tiles
  // of their own anyway).
  auto cpu_rule = [&] {
    return ceil_div(N, c.gemm[1]) * ceil_div(M, c.gemm[0]) < 2 && c.gemm_small != c.gemm
               ? kSmallSet
               : kMediumSet;
  };
  // SWITCHYARD_VK_GEMM_SPLIT_K's parts on set s (1 when not forced).
  auto forced_parts = [&](GemmSet s) {
    if (!c.gemm_forced_splits) return uint32_t(1);
    const uint64_t BK = set_tiles(c, s)[2];
    const SplitRoom r = split_room(c, g, BK);
    return uint32_t(parts_for(K, std::clamp<uint64_t>(c.gemm_forced_splits, r.least, r.most), BK));
  };
  if (c.gemm_forced_set >= 0 || (c.gemm_forced_splits && c.compute_units == 0)) {
    best.set = c.gemm_forced_set >= 0 ? GemmSet(c.gemm_forced_set) : cpu_rule();
    best.splits = forced_parts(best.set);
    return best;
  }
  for (const LaunchConfig::Tuned& t : c.tuned) {
    if (c.gemm_forced_splits) break;  // forced settings win over tuned ones
    if (t.m != g.m || t.n != g.n || t.k != g.k || t.batch != std::max<int64_t>(1, g.batch) ||
        t.ta != g.trans_a || t.tb != g.trans_b || t.set > kLargeSet || !usable(c, GemmSet(t.set)))
      continue;
    const uint64_t BK = set_tiles(c, GemmSet(t.set))[2];
    const SplitRoom r = split_room(c, g, BK);
    // Parts as the shader cuts them, within what the device takes now.
    const bool fits = t.splits == 1 ? r.least == 1 : t.splits >= r.least && t.splits <= r.most;
    if (fits && parts_for(K, t.splits, BK) == t.splits) return {GemmSet(t.set), t.splits};
  }
  if (c.compute_units == 0) return {cpu_rule(), 1};
  double least = 0;
  bool any = false;
  for (GemmSet s : {kLargeSet, kMediumSet, kSmallSet}) {
    if (!usable(c, s)) continue;
    const uint64_t BK = set_tiles(c, s)[2];
    const SplitRoom r = split_room(c, g, BK);
    uint64_t hi = r.most;
    if (r.most > 1) hi = std::min(hi, std::max<uint64_t>(1, nonneg(g.k) / (kMinSteps * BK)));
    if (c.gemm_forced_splits) {  // the set of least modeled time with the forced parts
      const uint32_t S = forced_parts(s);
      const double t = cost(c, g, s, S);
      if (!any || t < least) least = t, best = {s, S}, any = true;
      continue;
    }
    uint64_t last = 0;
    for (uint64_t want = std::max<uint64_t>(1, r.least); want <= std::max(hi, r.least); ++want) {
      const uint64_t S = parts_for(nonneg(g.k), want, BK);
      if (S == last) continue;
      last = S;
      const double t = cost(c, g, s, S);
      if (!any || t < least) least = t, best = {s, uint32_t(S)}, any = true;
    }
  }
  return best;
}

std::vector<GemmChoice> gemm_candidates(const LaunchConfig& c, const GemmParams& g) {
  std::vector<GemmChoice> out;
  for (GemmSet s : {kLargeSet, kMediumSet, kSmallSet}) {
    if (!usable(c, s)) continue;
    const uint64_t BK = set_tiles(c, s)[2];
    const SplitRoom r = split_room(c, g, BK);
    uint64_t last = 0;
    for (uint64_t want : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}) {
      if (want > r.most && want > r.least) break;
      const uint64_t S = parts_for(nonneg(g.k), std::max(want, r.least), BK);
      if (S == last) continue;
      last = S;
      out.push_back({s, uint32_t(S)});
    }
  }
  return out;
}

uint32_t gemm_flags(const LaunchConfig& c, GemmChoice ch) {
  const uint32_t fl = ch.set == kLargeSet ? kLargeTiles : ch.set == kSmallSet ? kSmallTiles : 0u;
  return fl | (c.gemm_prefetch ? kGemmPrefetch : 0u);
}

const std::array<uint32_t, 5>& gemm_tiles(const LaunchConfig& c, uint32_t flags) {
  return flags & kLargeTiles ? c.gemm_large : flags & kSmallTiles ? c.gemm_small : c.gemm;
}

std::string describe(const LaunchConfig& c, GemmChoice ch) {
  static const char* names[] = {"medium", "small", "large"};
  const auto& t = set_tiles(c, ch.set);
  std::string s =
      detail::cat(names[ch.set], " ", t[0], "x", t[1], "x", t[2], " (", t[3], "x", t[4], ")");
  if (ch.splits > 1) s += detail::cat(", ", ch.splits, " parts of K");
  return s;
}

}  // namespace switchyard::vk_impl
