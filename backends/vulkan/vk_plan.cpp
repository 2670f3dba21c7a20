// SPDX-License-Identifier: MIT
// Planning a Program's dispatches (plan_launches in vk_launch.h): GEMMs
// split along K and launches checked against the driver's loop budget,
// reductions split in two passes through the scratch, elementwise launches
// split where their tensors pass maxStorageBufferRange.
#include <algorithm>
#include <cmath>

#include "switchyard/dtype.h"
#include "switchyard/error.h"
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

// Bytes an argument may span in one binding: maxStorageBufferRange, less
// what launch_params may add (its descriptor starts up to an alignment below
// the argument and ends rounded up to 16 bytes); 0: no limit.
uint64_t binding_room(const LaunchConfig& c) {
  return c.max_range ? c.max_range - std::min<uint64_t>(c.max_range, c.storage_align + 16) : 0;
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
    case Kernel::channel_affine: {
      const auto q = params<Kernel::channel_affine>(p);
      return by_rows(q.outer * q.channels, q.inner, 0);
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

// The K of each part of a split GEMM on this device (0: never split).
int64_t gemm_k_part(const LaunchConfig& c) {
  if (c.loop_budget == 0) return 0;
  // Half the budget per part (measured with the default llvmpipe tiles: 98
  // iterations a step by this count, and a K of 669 steps was the first to
  // come out wrong without vec4 loads, 993 with them).
  int64_t part = INT64_MAX;
  for (const auto* t : {&c.gemm, &c.gemm_small}) {
    const uint64_t wg = uint64_t((*t)[0] / (*t)[3]) * ((*t)[1] / (*t)[4]);
    const uint64_t steps = std::max<uint64_t>(1, c.loop_budget / 2 / gemm_step_loops(*t, wg));
    part = std::min(part, int64_t(steps * (*t)[2]));
  }
  return part;
}

}  // namespace

// ---- tensors past maxStorageBufferRange ----------------------------------------

namespace {

template <class P>
KernelParams with_n(P q, int64_t n) {
  q.n = n;
  return q;
}

// An elementwise launch seen as `outer` runs of n items along one axis:
// argument a spans (count - 1) * step[a] + item[a] bytes for `count` items
// from where it starts (step 0: the same bytes for any count, as Adam's
// step counter). binary is cut along dimension k, the outermost longer
// than 1 whose slices fit in `room` bytes (a flat one is one row of
// elements first); the dimensions outside k are iterated (outer). False
// for any launch that is not elementwise.
struct Axis {
  int64_t n = 0, outer = 1;
  int k = 0;             // binary's dimension (outer: the dimensions before it)
  bool elements = true;  // items are single elements (binary: k == 3)
  uint64_t step[5] = {}, item[5] = {};
  BinaryParams binary{};
  int64_t out_strides[4] = {};  // binary's output, in elements
};
bool elementwise_axis(const Instr& ins, uint64_t room, Axis& x) {
  const KernelParams& p = ins.params;
  auto flat = [&](int64_t n, std::initializer_list<uint64_t> sizes) {
    x.n = n;
    int a = 0;
    for (uint64_t z : sizes) x.step[a] = z, x.item[a++] = z ? z : 4;
    return true;
  };
  switch (ins.kernel) {
    case Kernel::fill:
      return flat(params<Kernel::fill>(p).n, {dtype_size(params<Kernel::fill>(p).dtype)});
    case Kernel::cast: {
      const auto q = params<Kernel::cast>(p);
      return flat(q.n, {dtype_size(q.to), dtype_size(q.from)});
    }
    case Kernel::affine:
      return flat(params<Kernel::affine>(p).n, {4, 4});
    case Kernel::unary:
      return flat(params<Kernel::unary>(p).n, {4, 4});
    case Kernel::unary_backward:
      return flat(params<Kernel::unary_backward>(p).n, {4, 4, 4, 4});
    case Kernel::sgd_update:
      return flat(params<Kernel::sgd_update>(p).n, {4, 4});
    case Kernel::sgd_momentum_update:
      return flat(params<Kernel::sgd_momentum_update>(p).n, {4, 4, 4});
    case Kernel::adam_update:
      return flat(params<Kernel::adam_update>(p).n, {4, 4, 4, 4, 0});
    case Kernel::binary: {
      BinaryParams q = params<Kernel::binary>(p);
      const int64_t* d = q.dims;
      if (binary_flat(q))
        q = BinaryParams{.op = q.op,
                         .dims = {1, 1, 1, d[0] * d[1] * d[2] * d[3]},
                         .a_strides = {0, 0, 0, 1},
                         .b_strides = {0, 0, 0, 1}};
      int64_t* out = x.out_strides;
      out[3] = 1;
      for (int j = 2; j >= 0; --j) out[j] = out[j + 1] * d[j + 1];
      const int64_t* strides[3] = {out, q.a_strides, q.b_strides};
      auto slice = [&](int a, int k) {  // bytes one index along k spans
        if (a == 0) return uint64_t(out[k]) * 4;
        int64_t e = 1;
        for (int j = k + 1; j < 4; ++j) e += (d[j] - 1) * strides[a][j];
        return uint64_t(e) * 4;
      };
      int k = 0;
      while (k < 3 && (d[k] == 1 || std::max({slice(0, k), slice(1, k), slice(2, k)}) > room)) ++k;
      x.k = k;
      x.elements = k == 3;
      x.n = d[k];
      for (int j = 0; j < k; ++j) x.outer *= d[j];
      for (int a = 0; a < 3; ++a) x.step[a] = uint64_t(strides[a][k]) * 4, x.item[a] = slice(a, k);
      x.binary = q;
      return true;
    }
    default:
      return false;
  }
}

// The params of `count` items of an elementwise launch.
KernelParams part_params(const Instr& ins, const Axis& x, int64_t count) {
  const KernelParams& p = ins.params;
  switch (ins.kernel) {
    case Kernel::fill:
      return with_n(params<Kernel::fill>(p), count);
    case Kernel::cast:
      return with_n(params<Kernel::cast>(p), count);
    case Kernel::affine:
      return with_n(params<Kernel::affine>(p), count);
    case Kernel::unary:
      return with_n(params<Kernel::unary>(p), count);
    case Kernel::unary_backward:
      return with_n(params<Kernel::unary_backward>(p), count);
    case Kernel::sgd_update:
      return with_n(params<Kernel::sgd_update>(p), count);
    case Kernel::sgd_momentum_update:
      return with_n(params<Kernel::sgd_momentum_update>(p), count);
    case Kernel::adam_update:
      return with_n(params<Kernel::adam_update>(p), count);
    default: {  // binary: one index of each dimension outside k
      BinaryParams q = x.binary;
      for (int j = 0; j < x.k; ++j) q.dims[j] = 1;
      q.dims[x.k] = count;
      return q;
    }
  }
}

constexpr int64_t kMaxRangeParts = 4096;

// Splits an elementwise launch whose arguments would span more than the
// device's maxStorageBufferRange into parts that each fit: each part's
// arguments start further on and are bound as their own ranges. Returns
// the number of parts appended to `parts` (0: not elementwise, or it fits).
int64_t split_by_range(const LaunchConfig& c, const Instr& ins, std::vector<Instr>& parts) {
  const uint64_t room = binding_room(c);
  Axis x;
  if (c.max_range == 0 || !elementwise_axis(ins, room, x) || x.n * x.outer <= 1) return 0;
  int64_t count = x.n;
  for (int a = 0; a < ins.nargs; ++a) {
    if (x.item[a] > room)
      throw DeviceLimit(detail::cat("[", kernel_name(ins.kernel), "] expected argument ", a,
                                    "'s innermost rows within maxStorageBufferRange (", c.max_range,
                                    " bytes) on ", c.device, ", found ", x.item[a], " bytes"));
    if (x.step[a]) count = std::min<int64_t>(count, int64_t((room - x.item[a]) / x.step[a]) + 1);
  }
  count = std::min<int64_t>(count, INT32_MAX);  // params travel as 32-bit words
  if (count >= x.n && x.outer == 1) return 0;
  // A launch per part (its descriptor set, its table entry): a layout
  // needing more, as a transposed operand cut element by element, is refused.
  const int64_t total = x.outer * int64_t(ceil_div(nonneg(x.n), nonneg(count)));
  if (total > kMaxRangeParts)
    throw DeviceLimit(detail::cat("[", kernel_name(ins.kernel), "] expected at most ",
                                  kMaxRangeParts, " launches to keep each argument within ",
                                  "maxStorageBufferRange (", c.max_range, " bytes) on ", c.device,
                                  ", found ", total,
                                  " for this layout: make the operands "
                                  "contiguous"));
  if (x.elements && count > 16) count &= ~int64_t(15);  // parts start 16-element aligned
  int64_t made = 0;
  for (int64_t o = 0; o < x.outer; ++o) {
    uint64_t base[5] = {};  // the run's start: one index of each dimension outside k
    for (int64_t r = o, j = x.k - 1; j >= 0; --j) {
      const int64_t i = r % x.binary.dims[j];
      r /= x.binary.dims[j];
      base[0] += uint64_t(i * x.out_strides[j]) * 4;
      base[1] += uint64_t(i * x.binary.a_strides[j]) * 4;
      base[2] += uint64_t(i * x.binary.b_strides[j]) * 4;
    }
    for (int64_t first = 0; first < x.n; first += count, ++made) {
      const int64_t m = std::min(count, x.n - first);
      Instr& part = parts.emplace_back(ins);
      part.params = part_params(ins, x, m);
      for (int a = 0; a < ins.nargs; ++a) {
        part.args[size_t(a)].offset += base[a] + uint64_t(first) * x.step[a];
        part.args[size_t(a)].bytes = uint64_t(m - 1) * x.step[a] + x.item[a];
      }
    }
  }
  return made;
}

}  // namespace

void plan_launches(const LaunchConfig& c, const Program& prog, std::vector<Launch>& out,
                   std::vector<Instr>& parts) {
  out.clear();
  parts.clear();
  const int64_t part = gemm_k_part(c);
  // The scratch, handed out in order to the Program's split reductions and
  // reused from its start once full (the hazards then order the reuse).
  uint64_t used = 0;
  auto region = [&](uint64_t bytes) {
    bytes = (bytes + 255) & ~uint64_t(255);
    if (used + bytes > c.scratch_bytes) used = 0;
    used += bytes;
    return used - bytes;
  };
  auto two_passes = [&](const Instr& ins, uint32_t at, uint32_t aux, uint64_t bytes) {
    const uint64_t off = region(bytes);
    out.push_back({&ins, kPartials, at, aux, off, bytes});
    out.push_back({&ins, kFinish, at, aux, off, bytes});
  };
  for (uint32_t at = 0; at < prog.instrs.size(); ++at) {
    const Instr& ins = prog.instrs[at];
    if (ins.kernel == Kernel::cross_entropy) {
      const uint32_t groups = cross_entropy_groups(c, params<Kernel::cross_entropy>(ins.params));
      if (groups > 1) {
        two_passes(ins, at, groups, uint64_t(groups) * 2 * sizeof(float));
        continue;
      }
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
          out.push_back({nullptr, kPartials, at, uint32_t(z1 - z0), off + z0 * outputs * 4,
                         (z1 - z0) * outputs * 4});
        }
        Instr& finish = parts.emplace_back(ins);
        finish.args[1].bytes = 16;  // bound, not read
        out.push_back({nullptr, kFinish, at, n, off, bytes});
        continue;
      }
      if (n > 1) {
        two_passes(ins, at, n, bytes);
        continue;
      }
    }
    if (ins.kernel == Kernel::gemm && part > 0 && params<Kernel::gemm>(ins.params).k > part) {
      const GemmParams g = params<Kernel::gemm>(ins.params);
      const int64_t lda = g.lda ? g.lda : (g.trans_a ? g.m : g.k);
      const int64_t ldb = g.ldb ? g.ldb : (g.trans_b ? g.k : g.n);
      for (int64_t k0 = 0; k0 < g.k; k0 += part) {
        GemmParams q = g;
        q.k = std::min(part, g.k - k0);
        q.lda = lda;
        q.ldb = ldb;
        q.has_bias = g.has_bias && k0 == 0;
        if (k0 + q.k < g.k) q.act = Unary::none;
        Instr& part_ins = parts.emplace_back(ins);
        part_ins.params = q;
        // A's (m, k) is at m*lda + k (k*lda + m transposed); B's (k, n) at
        // k*ldb + n (n*ldb + k transposed): the part's columns of K start
        // that many floats on.
        const uint64_t adv[2] = {uint64_t(k0 * (g.trans_a ? lda : 1)) * 4,
                                 uint64_t(k0 * (g.trans_b ? 1 : ldb)) * 4};
        for (int a = 0; a < 2; ++a) {
          Arg& arg = part_ins.args[size_t(a + 1)];
          SY_CHECK(arg.bytes == 0 || arg.bytes > adv[a], "gemm", "expected operand ", a ? "B" : "A",
                   " to extend past K column ", k0, ", found ", arg.bytes, " bytes");
          arg.offset += adv[a];
          if (arg.bytes) arg.bytes -= adv[a];
        }
        out.push_back({nullptr, k0 == 0 ? 0u : kGemmAccumulate, at});  // set below
      }
      continue;
    }
    if (const int64_t n = split_by_range(c, ins, parts); n > 0) {
      for (int64_t k = 0; k < n; ++k) out.push_back({nullptr, 0, at});  // set below
      continue;
    }
    out.push_back({&ins, 0, at});
  }
  // The parts, in order, once `parts` has stopped growing.
  size_t next = 0;
  for (Launch& l : out)
    if (!l.ins) l.ins = &parts[next++];
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
