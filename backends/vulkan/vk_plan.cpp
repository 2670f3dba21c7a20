// SPDX-License-Identifier: MIT
// Planning a Program's dispatches (plan_launches in vk_launch.h): GEMMs
// split along K and launches checked against the driver's loop budget,
// reductions split in two passes through the scratch, launches whose
// tensors pass maxStorageBufferRange split into parts (vk_ranges.cpp's
// split_by_range and split_gemm) that are then planned the same way.
#include <algorithm>
#include <cmath>

#include "switchyard/dtype.h"
#include "switchyard/error.h"
#include "vk_gemm.h"
#include "vk_instance.h"
#include "vk_launch.h"

namespace switchyard::vk_impl {
namespace {

// Each column-sum part at least this long (its partial is one float read
// again by the second pass, so a part's own reads dwarf it).
constexpr uint64_t kMinPart = 64;

uint64_t isqrt(uint64_t v) {
  uint64_t r = uint64_t(std::sqrt(double(v)));
  while (r * r > v) --r;
  while ((r + 1) * (r + 1) <= v) ++r;
  return r;
}

// Whether a reduce_sum's input passes one binding and its first pass is cut
// into launches by ranges of parts (outer == 1: the parts are consecutive
// in memory).
bool reduce_by_range(const LaunchConfig& c, const ReduceSumParams& r) {
  const uint64_t room = binding_room(c);
  return room && r.outer == 1 && nonneg(r.len) * nonneg(r.inner) * 4 > room &&
         nonneg(r.inner) * 4 <= room;
}

// The parts reduce_sum's len is split into (1: one pass). Enough that the
// first pass fills the device (c.fill_groups workgroups), within the loop
// budget and the scratch. Row sums (a workgroup per row) split only rows
// too few to fill it, into parts of at least 16 elements per invocation.
// Column sums (an invocation per output) split into at most sqrt(len)
// parts: the second pass adds `parts` partials per output one after the
// other, so more parts would make it the longer of the two. An input past
// one binding (reduce_by_range) gets parts whose rows each fit one.
uint32_t reduce_parts(const LaunchConfig& c, const ReduceSumParams& r) {
  const uint64_t outputs = nonneg(r.outer) * nonneg(r.inner), len = nonneg(r.len);
  if (outputs == 0 || len < 2) return 1;
  const uint64_t most = c.loop_budget ? c.loop_budget - c.loop_budget / 4 : 0;
  uint64_t want, least = 1;
  if (row_sums(c, r)) {
    want = std::min(ceil_div(c.fill_groups, outputs), len / (uint64_t(c.wg) * 16));
    if (most) least = ceil_div(ceil_div(len, c.wg), most / 2);
  } else {
    // Once half the device is busy, a second pass would cost more than it saves.
    want = ceil_div(outputs, c.wg) * 2 >= c.fill_groups
               ? 1
               : std::min({ceil_div(uint64_t(c.fill_groups) * c.wg, outputs), isqrt(len),
                           len / kMinPart});
    if (most) least = ceil_div(len, most / 2);
  }
  if (reduce_by_range(c, r))  // a part's rows within one binding
    least = std::max(least, ceil_div(len, binding_room(c) / (nonneg(r.inner) * 4)));
  const uint64_t fit = c.scratch_bytes / sizeof(float) / outputs;
  uint64_t parts = std::min<uint64_t>({std::max(want, least), fit, len, kMaxGroups});
  parts = ceil_div(len, ceil_div(len, parts));  // no part left empty
  return parts >= 2 ? uint32_t(parts) : 1;
}

}  // namespace

// ---- the loop budget (Mesa's llvmpipe) ------------------------------------------

namespace {

// Iterations of one workgroup reduction (reduce.glsl's wg_sum / wg_max): a
// loop over the subgroups' partial results or a shared-memory tree, at
// most WG / 4 steps on any subgroup size the backend takes.
uint64_t wg_reduce(const LaunchConfig& c) { return c.wg / 4 + 8; }

// The most loop iterations one invocation of the launch runs, all loops
// together, from each shader's loop structure (its header says it): every
// loop whose trip count depends on the sizes, counting the enclosing
// grid-stride or row loop's own iterations too. Loops of a constant trip
// count are unrolled by the driver and not counted.
uint64_t loop_iterations(const LaunchConfig& c, const Launch& l) {
  const Instr& ins = *l.ins;
  const KernelParams& p = ins.params;
  uint32_t flags = l.extra_flags;
  if (ins.kernel == Kernel::transpose && transpose_tiled(c, params<Kernel::transpose>(p)))
    flags |= 2u;
  uint32_t g[3] = {1, 1, 1};
  launch_grid(c, ins, flags, l.aux, g);
  const uint64_t inv = uint64_t(g[0]) * g[1] * g[2] * c.wg;  // invocations of the grid
  const uint64_t red = wg_reduce(c);
  auto items = [&](int64_t n, uint64_t per) {  // FOR_ITEMS over n, `per` iterations each
    return ceil_div(nonneg(n), inv) * (per + 1);
  };
  auto by_rows = [&](int64_t rows, int64_t per_row, uint64_t per) {  // rows_by_items' loops
    return ceil_div(nonneg(rows), g[1]) *
           (ceil_div(nonneg(per_row), uint64_t(g[0]) * c.wg) * (per + 1) + 1);
  };
  auto per_channel = [&](const auto& q, uint64_t passes) {  // a workgroup per channel
    return ceil_div(nonneg(q.channels), g[0]) *
           (passes * (ceil_div(nonneg(q.outer * q.inner), c.wg) + red) + 1);
  };
  auto taps = [](const auto& q) { return nonneg(q.kernel[0]) * (nonneg(q.kernel[1]) + 1); };
  auto windows = [](const auto& q) {  // of a pooling backward's element, rows x (cols + 1)
    return ceil_div(nonneg(q.kernel[0]), nonneg(q.stride[0])) *
           (ceil_div(nonneg(q.kernel[1]), nonneg(q.stride[1])) + 1);
  };
  // Row kernels: `passes` over each row, `reductions` workgroup reductions
  // per row when rows are a workgroup's, else the row in one invocation.
  auto per_row = [&](int64_t rows, int64_t cols, uint64_t passes, uint64_t reductions) {
    if (long_rows(c, cols))
      return ceil_div(nonneg(rows), g[0]) *
             (passes * ceil_div(nonneg(cols), c.wg) + reductions * red + 1);
    return items(rows, passes * nonneg(cols));
  };
  switch (ins.kernel) {
    case Kernel::argmax: {  // a workgroup's rows end in a shared-memory tree
      const auto q = params<Kernel::argmax>(p);
      return per_row(q.rows, q.cols, 1, 1);
    }
    case Kernel::cross_entropy: {
      const auto q = params<Kernel::cross_entropy>(p);
      if (flags & kFinish) return ceil_div(l.aux, c.wg) + 2 * red + 1;
      return per_row(q.rows, q.cols, 2, 2) + 2 * red;
    }
    case Kernel::cross_entropy_backward: {
      const auto q = params<Kernel::cross_entropy_backward>(p);
      return per_row(q.rows, q.cols, 3, 2);
    }
    case Kernel::reduce_sum: {
      const auto q = params<Kernel::reduce_sum>(p);
      const uint64_t parts = flags & kPartials ? l.aux : 1, len = ceil_div(nonneg(q.len), parts);
      if (flags & kFinish) return items(q.outer * q.inner, l.aux);
      if (row_sums(c, q))  // a workgroup per row (and part)
        return ceil_div(nonneg(q.outer) * parts, g[0]) * (ceil_div(len, c.wg) + red + 1);
      return items(q.outer * q.inner * int64_t(parts), len);
    }
    case Kernel::transpose: {
      const auto q = params<Kernel::transpose>(p);
      if (!(flags & 2u)) return 0;
      const uint64_t tiles = ceil_div(nonneg(q.rows), kTile) * ceil_div(nonneg(q.cols), kTile);
      return ceil_div(tiles, g[0]) * (2 * (ceil_div(kTile, c.wg / kTile) + 1) + 1);
    }
    case Kernel::softmax: {
      const auto q = params<Kernel::softmax>(p);
      return per_row(q.rows, q.cols, 3, 3);
    }
    case Kernel::softmax_backward: {
      const auto q = params<Kernel::softmax_backward>(p);
      return per_row(q.rows, q.cols, 2, 2);
    }
    case Kernel::channel_stats:
      return per_channel(params<Kernel::channel_stats>(p), 2);
    case Kernel::channel_sums:
      return per_channel(params<Kernel::channel_sums>(p), 2);
    case Kernel::channel_affine: {  // flat: groups of 4
      const auto q = params<Kernel::channel_affine>(p);
      return items(int64_t(ceil_div(nonneg(q.outer * q.channels * q.inner), 4)), 4);
    }
    case Kernel::swap_axes: {
      const auto q = params<Kernel::swap_axes>(p);
      return by_rows(q.outer * q.b, q.a * q.inner, 0);
    }
    case Kernel::embedding_backward: {
      const auto q = params<Kernel::embedding_backward>(p);
      return items(q.ranges * q.dim, nonneg(q.n) + ceil_div(nonneg(q.num), nonneg(q.ranges)));
    }
    case Kernel::im2col: {
      const auto q = params<Kernel::im2col>(p);
      return by_rows(q.channels * q.kernel[0] * q.kernel[1] * q.batch, q.out_h * q.out_w, 0);
    }
    case Kernel::col2im: {
      const auto q = params<Kernel::col2im>(p);
      return by_rows(q.batch * q.channels, q.height * q.width, taps(q));
    }
    case Kernel::conv2d:
    case Kernel::conv2d_backward_input:
    case Kernel::conv2d_backward_weight: {
      // conv_gemm.glsl: per BK step, the A and B tile loads (up to BK/(WG*4/B)
      // entries each, 4 element loads apiece) and the BK loop; then the
      // epilogue's TN x TM. Any tile set may run (kernel_flags picks).
      const ConvGemm m = conv_gemm(ins);
      uint64_t most = 0;
      for (const auto* t : {&c.gemm, &c.gemm_small, &c.gemm_tall, &c.gemm_narrow}) {
        const uint64_t BM = (*t)[0], BN = (*t)[1], BK = (*t)[2], TM = (*t)[3], TN = (*t)[4];
        const uint64_t wg = (BM / TM) * (BN / TN);
        const uint64_t step =
            ceil_div(BK * BM / 4, wg) * 5 + ceil_div(BK * BN / 4, wg) * 5 + BK + 1;
        most = std::max(most, ceil_div(m.k, BK) * step + TN * (TM + 1) + 10);
      }
      return most;
    }
    case Kernel::max_pool2d: {
      const auto q = params<Kernel::max_pool2d>(p);
      return items(q.planes * q.out_h * q.out_w, taps(q));
    }
    case Kernel::avg_pool2d: {
      const auto q = params<Kernel::avg_pool2d>(p);
      return items(q.planes * q.out_h * q.out_w, taps(q));
    }
    case Kernel::max_pool2d_backward: {
      const auto q = params<Kernel::max_pool2d_backward>(p);
      return by_rows(q.planes, q.height * q.width, windows(q));
    }
    case Kernel::avg_pool2d_backward: {
      const auto q = params<Kernel::avg_pool2d_backward>(p);
      return items(q.planes * q.height * q.width, windows(q));
    }
    default:  // grid-stride loops over at most 2^32 items on grid_cap workgroups
      return 0;
  }
}

// Loop iterations of one BK step of the gemm shader with tiles t, the worst
// of its transposes: the A and B tile loads (grid-stride over the tile's
// entries, each up to 4 element loops of 4 when not vec4-aligned) and the
// BK loop (the TM/TN loops inside have constant trip counts).
uint64_t gemm_step_loops(const std::array<uint32_t, 5>& t, uint64_t wg) {
  const uint64_t BM = t[0], BN = t[1], BK = t[2];
  auto tile = [&](uint64_t B) {
    return std::max(ceil_div(B * BK / 16, wg) * 17, ceil_div(B * BK / 4, wg) * 5);
  };
  return tile(BM) + tile(BN) + BK + 1;
}

}  // namespace

int64_t gemm_k_part(const LaunchConfig& c) {
  if (c.loop_budget == 0) return 0;
  // Half the budget per part (measured with the default llvmpipe tiles: 98
  // iterations a step by this count, and a K of 669 steps was the first to
  // come out wrong without vec4 loads, 993 with them). Every set a GEMM may
  // run on.
  int64_t part = INT64_MAX;
  for (const auto* t : {&c.gemm, &c.gemm_small, &c.gemm_large}) {
    if (t == &c.gemm_large && !c.large_tiles && c.gemm_forced_set != kLargeSet) continue;
    const uint64_t wg = uint64_t((*t)[0] / (*t)[3]) * ((*t)[1] / (*t)[4]);
    // The prefetching loop's register loads and stores: up to 5 iterations
    // for each of its vec4 slots, twice.
    const uint64_t slots = ceil_div(uint64_t((*t)[0]) * (*t)[2] / 4, wg) +
                           ceil_div(uint64_t((*t)[1]) * (*t)[2] / 4, wg);
    const uint64_t step = gemm_step_loops(*t, wg) + (c.gemm_prefetch ? 10 * slots : 0);
    const uint64_t steps = std::max<uint64_t>(1, c.loop_budget / 2 / step);
    part = std::min(part, int64_t(steps * (*t)[2]));
  }
  return part;
}

void plan_launches(const LaunchConfig& c, const Program& prog, std::vector<Launch>& out,
                   std::vector<Instr>& parts) {
  out.clear();
  parts.clear();
  const int64_t k_part = gemm_k_part(c);
  // The scratch, handed out in order to the Program's split reductions and
  // reused from its start once full (the hazards then order the reuse).
  uint64_t used = 0;
  auto region = [&](uint64_t bytes) {
    bytes = (bytes + 255) & ~uint64_t(255);
    if (used + bytes > c.scratch_bytes) used = 0;
    used += bytes;
    return used - bytes;
  };
  // A launch of instruction `at`: the Program's own (part < 0) or parts[part]
  // (its pointer set once `parts` has stopped growing).
  auto push = [&](int64_t part, uint32_t at, uint32_t flags = 0, uint32_t aux = 0,
                  uint64_t off = kNoScratch, uint64_t bytes = 0) {
    out.push_back({part < 0 ? &prog.instrs[at] : nullptr, flags, at, aux, off, bytes, part});
  };
  auto two_passes = [&](int64_t part, uint32_t at, uint32_t aux, uint64_t bytes) {
    const uint64_t off = region(bytes);
    push(part, at, kPartials, aux, off, bytes);
    push(part, at, kFinish, aux, off, bytes);
  };
  // One instruction, or one part of it: a reduction in two passes where it
  // splits, else one launch.
  Instr copy;
  auto plan_one = [&](int64_t part, uint32_t at) {
    const Instr& ins = part < 0 ? prog.instrs[at] : (copy = parts[size_t(part)]);  // parts grows
    if (ins.kernel == Kernel::cross_entropy) {
      const uint32_t groups = cross_entropy_groups(c, params<Kernel::cross_entropy>(ins.params));
      if (groups > 1) return two_passes(part, at, groups, uint64_t(groups) * 2 * sizeof(float));
    }
    if (ins.kernel == Kernel::reduce_sum) {
      const ReduceSumParams r = params<Kernel::reduce_sum>(ins.params);
      const uint32_t n = reduce_parts(c, r);
      const uint64_t outputs = nonneg(r.outer * r.inner), bytes = outputs * n * sizeof(float);
      if (n > 1 && reduce_by_range(c, r)) {
        // The first pass as launches over ranges of parts, each binding its
        // rows of the input and its parts' slots of the scratch; the second
        // binds none of the input.
        const uint64_t off = region(bytes), len = nonneg(r.len), step = nonneg(r.inner) * 4;
        const uint64_t chunk = ceil_div(len, n);
        const uint64_t per = std::max<uint64_t>(1, binding_room(c) / (chunk * step));
        for (uint64_t z0 = 0; z0 < n; z0 += per) {
          const uint64_t z1 = std::min<uint64_t>(n, z0 + per), l0 = z0 * chunk,
                         l1 = std::min(len, z1 * chunk);
          Instr& part_ins = parts.emplace_back(ins);
          ReduceSumParams q = r;
          q.len = int64_t(l1 - l0);
          part_ins.params = q;
          part_ins.args[1].offset += l0 * step;
          part_ins.args[1].bytes = (l1 - l0) * step;
          push(int64_t(parts.size() - 1), at, kPartials, uint32_t(z1 - z0), off + z0 * outputs * 4,
               (z1 - z0) * outputs * 4);
        }
        parts.emplace_back(ins).args[1].bytes = 16;  // the finish: bound, not read
        return push(int64_t(parts.size() - 1), at, kFinish, n, off, bytes);
      }
      if (n > 1) return two_passes(part, at, n, bytes);
    }
    push(part, at);
  };
  for (uint32_t at = 0; at < prog.instrs.size(); ++at) {
    const Instr& ins = prog.instrs[at];
    if (ins.kernel == Kernel::gemm) {
      // Its variant; split-K as two passes through the scratch; else blocks
      // within the storage range and parts of K within the loop budget.
      const GemmParams g = params<Kernel::gemm>(ins.params);
      const GemmChoice ch = choose_gemm(c, g);
      const uint32_t fl = gemm_flags(c, ch);
      if (ch.splits > 1) {
        const uint64_t bytes = nonneg(g.m) * nonneg(g.n) * std::max<uint64_t>(1, nonneg(g.batch)) *
                               ch.splits * sizeof(float);
        const uint64_t off = region(bytes);
        push(-1, at, fl | kPartials, ch.splits, off, bytes);
        push(-1, at, fl | kFinish, ch.splits, off, bytes);
      } else if (split_gemm(c, ins, at, k_part, fl, out, parts) == 0) {
        push(-1, at, fl);
      }
      continue;
    }
    const size_t first = parts.size();
    const int64_t n = split_by_range(c, ins, parts);
    if (n == 0) {
      plan_one(-1, at);
    } else if (ins.kernel == Kernel::cross_entropy) {
      // Row blocks, each a first pass writing its workgroups' partials to
      // its own slots of one region, then one finish over them all (the
      // whole loss, bound without the rows).
      uint32_t per[kMaxRangeParts] = {}, total = 0;
      const uint32_t fit =
          uint32_t(std::min<uint64_t>(c.scratch_bytes / 8 / uint64_t(n), kMaxGroups));
      for (int64_t k = 0; k < n; ++k) {
        const auto q = params<Kernel::cross_entropy>(parts[first + size_t(k)].params);
        total += per[k] = std::max(1u, std::min(cross_entropy_groups(c, q), fit));
      }
      const uint64_t off = region(uint64_t(total) * 8);
      for (int64_t k = 0, done = 0; k < n; done += per[k++])
        push(int64_t(first) + k, at, kPartials, per[k], off + uint64_t(done) * 8, per[k] * 8ull);
      Instr& finish = parts.emplace_back(ins);
      finish.args[1].bytes = finish.args[2].bytes = 16;  // bound, not read
      push(int64_t(parts.size() - 1), at, kFinish, total, off, uint64_t(total) * 8);
    } else if (ins.kernel == Kernel::cross_entropy_backward) {
      // aux: the rows the mean is over (the whole batch's, not the block's).
      const int64_t rows = params<Kernel::cross_entropy_backward>(ins.params).rows;
      SY_CHECK(rows <= int64_t(UINT32_MAX), "cross_entropy_backward",
               "expected at most 2^32 - 1 rows on ", c.device, ", found ", rows);
      for (int64_t k = 0; k < n; ++k) push(int64_t(first) + k, at, 0, uint32_t(rows));
    } else {
      for (int64_t k = 0; k < n; ++k) plan_one(int64_t(first) + k, at);
    }
  }
  for (Launch& l : out)
    if (l.part >= 0) l.ins = &parts[size_t(l.part)];
  if (!c.loop_budget) return;
  // A quarter of the budget is left for what the count leaves out.
  const uint64_t most = c.loop_budget - c.loop_budget / 4;
  for (const Launch& l : out) {
    if (l.ins->kernel == Kernel::gemm) continue;  // its parts are planned within the budget
    const uint64_t n = loop_iterations(c, l);
    if (n > most)
      throw DeviceLimit(
          detail::cat("[", kernel_name(l.ins->kernel), "] expected at most ", most,
                      " loop iterations per invocation on ", c.device,
                      " (its driver ends a shader's loops after ", c.loop_budget,
                      " iterations in all and the result would be wrong), found about ", n,
                      " for this launch's sizes: split the tensor"));
  }
}

}  // namespace switchyard::vk_impl
