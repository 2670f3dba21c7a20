// SPDX-License-Identifier: MIT
// Launch translation (see vk_launch.h).
#include "vk_launch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "switchyard/dtype.h"
#include "switchyard/error.h"
#include "vk_instance.h"

namespace switchyard::vk_impl {
namespace {

// Grid-stride kernels get at most c.grid_cap workgroups: each invocation
// then loops over several items, so per-invocation set-up (reading the
// launch's parameters) is paid once per many elements.

uint32_t groups_for(const LaunchConfig& c, uint64_t items) {
  return uint32_t(std::clamp<uint64_t>((items + c.wg - 1) / c.wg, 1, c.grid_cap));
}

// Row kernels of two-dimensional dispatch: y over `rows` (the shader loops
// past 65535), x over a row's `items` (vec4s where the shader's vec4 path
// runs, so no workgroup is left idle); at most grid_cap workgroups in all.
void rows_by_items(const LaunchConfig& c, int64_t rows, int64_t items, uint32_t g[3]) {
  const uint64_t x = std::clamp<uint64_t>((uint64_t(std::max<int64_t>(items, 1)) + c.wg - 1) / c.wg,
                                          1, c.grid_cap);
  const uint64_t y_cap = std::max<uint64_t>(1, std::min<uint64_t>(kMaxGroups, c.grid_cap / x));
  g[0] = uint32_t(x);
  g[1] = uint32_t(std::clamp<uint64_t>(uint64_t(std::max<int64_t>(rows, 1)), 1, y_cap));
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? (a + b - 1) / b : a; }
uint64_t u(int64_t v) { return uint64_t(std::max<int64_t>(v, 0)); }

// One workgroup per row, grid-stride over rows.
uint32_t row_groups(const LaunchConfig& c, int64_t rows) {
  return uint32_t(std::clamp<int64_t>(rows, 1, c.grid_cap));
}

// Row kernels: rows of `cols` are a workgroup's each (kRowGroups), or an
// invocation's.
bool long_rows(const LaunchConfig& c, int64_t cols) { return cols > c.short_row; }
uint32_t rowwise_groups(const LaunchConfig& c, int64_t rows, int64_t cols) {
  return long_rows(c, cols) ? row_groups(c, rows) : groups_for(c, u(rows));
}
bool row_sums(const LaunchConfig& c, const ReduceSumParams& r) {  // reduce_sum's row mode
  return r.inner == 1 && long_rows(c, r.len);
}

constexpr uint32_t kTile = 32;  // transpose.comp's T

// transpose.comp's tiled path: 4- and 8-byte elements, both sides a tile wide.
bool transpose_tiled(const LaunchConfig& c, const TransposeParams& t) {
  return c.tiled_transpose && (t.elem_size == 4 || t.elem_size == 8) && t.rows >= kTile &&
         t.cols >= kTile;
}

// Each column-sum part at least this long (its partial is one float read
// again by the second pass, so a part's own reads dwarf it).
constexpr uint64_t kMinPart = 64;

uint64_t isqrt(uint64_t v) {
  uint64_t r = uint64_t(std::sqrt(double(v)));
  while (r * r > v) --r;
  while ((r + 1) * (r + 1) <= v) ++r;
  return r;
}

// The parts reduce_sum's len is split into (1: one pass). Enough that the
// first pass fills the device (c.fill_groups workgroups), within the loop
// budget and the scratch. Row sums (a workgroup per row) split only rows
// too few to fill it, into parts of at least 16 elements per invocation.
// Column sums (an invocation per output) split into at most sqrt(len)
// parts: the second pass adds `parts` partials per output one after the
// other, so more parts would make it the longer of the two.
uint32_t reduce_parts(const LaunchConfig& c, const ReduceSumParams& r) {
  const uint64_t outputs = u(r.outer) * u(r.inner), len = u(r.len);
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
  const uint64_t fit = c.scratch_bytes / sizeof(float) / outputs;
  const uint64_t parts = std::min<uint64_t>({std::max(want, least), fit, len, kMaxGroups});
  return parts >= 2 ? uint32_t(parts) : 1;
}

// The workgroups of cross_entropy's first pass (two passes when above 1):
// enough to fill the device and no more, since each ends in a workgroup sum
// (on lavapipe 410 workgroups of 256 rows took 1.8 times as long as one
// workgroup of all 104857).
uint32_t cross_entropy_groups(const LaunchConfig& c, const CrossEntropyParams& q) {
  const uint32_t fit = uint32_t(std::min<uint64_t>(c.scratch_bytes / 8, kMaxGroups));
  return std::min({rowwise_groups(c, q.rows, q.cols), c.fill_groups, fit});
}

}  // namespace

void launch_grid(const LaunchConfig& c, const Instr& ins, uint32_t flags, uint32_t aux,
                 uint32_t g[3]) {
  const KernelParams& p = ins.params;
  g[1] = g[2] = 1;
  auto quads = [](int64_t n) { return uint64_t(n + 3) / 4; };
  auto rows = [&](int64_t r) { return row_groups(c, r); };
  // No default: a kernel added to the table without a case here fails the
  // build (-Werror=switch).
  switch (ins.kernel) {
    case Kernel::fill:
      g[0] = groups_for(c, quads(params<Kernel::fill>(p).n));
      return;
    case Kernel::affine:
      g[0] = groups_for(c, quads(params<Kernel::affine>(p).n));
      return;
    case Kernel::unary:
      g[0] = groups_for(c, quads(params<Kernel::unary>(p).n));
      return;
    case Kernel::unary_backward:
      g[0] = groups_for(c, quads(params<Kernel::unary_backward>(p).n));
      return;
    case Kernel::sgd_update:
      g[0] = groups_for(c, quads(params<Kernel::sgd_update>(p).n));
      return;
    case Kernel::sgd_momentum_update:
      g[0] = groups_for(c, quads(params<Kernel::sgd_momentum_update>(p).n));
      return;
    case Kernel::adam_update:
      g[0] = groups_for(c, quads(params<Kernel::adam_update>(p).n));
      return;
    case Kernel::binary: {
      const auto b = params<Kernel::binary>(p);
      g[0] = groups_for(c, quads(b.dims[0] * b.dims[1] * b.dims[2] * b.dims[3]));
      return;
    }
    case Kernel::arange:
      g[0] = groups_for(c, uint64_t(params<Kernel::arange>(p).n));
      return;
    case Kernel::rand_uniform:
      g[0] = groups_for(c, uint64_t(params<Kernel::rand_uniform>(p).n));
      return;
    case Kernel::rand_normal:
      g[0] = groups_for(c, uint64_t(params<Kernel::rand_normal>(p).n));
      return;
    case Kernel::cast:
      g[0] = groups_for(c, uint64_t(params<Kernel::cast>(p).n));
      return;
    case Kernel::transpose: {
      const auto t = params<Kernel::transpose>(p);
      g[0] = flags & 2u
                 ? row_groups(c, int64_t(ceil_div(u(t.rows), kTile) * ceil_div(u(t.cols), kTile)))
                 : groups_for(c, uint64_t(t.rows * t.cols));
      return;
    }
    case Kernel::pad:
      g[0] = groups_for(c, uint64_t(params<Kernel::pad>(p).total));
      return;
    case Kernel::expand: {
      const auto e = params<Kernel::expand>(p);
      g[0] = groups_for(c, uint64_t(e.outer * e.len * e.inner));
      return;
    }
    case Kernel::reduce_sum: {
      const auto r = params<Kernel::reduce_sum>(p);
      const int64_t items = r.outer * r.inner * (flags & kPartials ? int64_t(aux) : 1);
      g[0] = flags & kFinish  ? groups_for(c, u(r.outer * r.inner))
             : row_sums(c, r) ? rows(items)
                              : groups_for(c, u(items));
      return;
    }
    case Kernel::softmax: {
      const auto q = params<Kernel::softmax>(p);
      g[0] = rowwise_groups(c, q.rows, q.cols);
      return;
    }
    case Kernel::softmax_backward: {
      const auto q = params<Kernel::softmax_backward>(p);
      g[0] = rowwise_groups(c, q.rows, q.cols);
      return;
    }
    case Kernel::cross_entropy:
      g[0] = flags & kFinish ? 1 : cross_entropy_groups(c, params<Kernel::cross_entropy>(p));
      return;
    case Kernel::cross_entropy_backward: {
      const auto q = params<Kernel::cross_entropy_backward>(p);
      g[0] = rowwise_groups(c, q.rows, q.cols);
      return;
    }
    case Kernel::argmax: {
      const auto q = params<Kernel::argmax>(p);
      g[0] = rowwise_groups(c, q.rows, q.cols);
      return;
    }
    case Kernel::embedding: {
      const auto q = params<Kernel::embedding>(p);
      g[0] = groups_for(c, uint64_t(q.n * q.dim));
      return;
    }
    case Kernel::embedding_backward: {
      const auto q = params<Kernel::embedding_backward>(p);
      g[0] = groups_for(c, uint64_t(q.ranges * q.dim));
      return;
    }
    case Kernel::gemm: {
      const auto m = params<Kernel::gemm>(p);
      const auto& t = flags & kSmallTiles ? c.gemm_small : c.gemm;
      uint64_t gx = (uint64_t(m.n) + t[1] - 1) / t[1], gy = (uint64_t(m.m) + t[0] - 1) / t[0];
      SY_CHECK(gx <= kMaxGroups && gy <= kMaxGroups, "gemm", "expected at most ", kMaxGroups * t[0],
               " rows and columns on ", c.device, ", found ", m.m, "x", m.n);
      const uint64_t gz = uint64_t(std::max<int64_t>(m.batch, 1));
      SY_CHECK(gz <= kMaxGroups, "gemm", "expected at most ", kMaxGroups, " batched products on ",
               c.device, ", found ", m.batch);
      g[0] = uint32_t(std::max<uint64_t>(gx, 1));
      g[1] = uint32_t(std::max<uint64_t>(gy, 1));
      g[2] = uint32_t(gz);
      return;
    }
    case Kernel::channel_stats:
      g[0] = rows(params<Kernel::channel_stats>(p).channels);
      return;
    case Kernel::channel_sums:
      g[0] = rows(params<Kernel::channel_sums>(p).channels);
      return;
    case Kernel::channel_affine: {
      const auto q = params<Kernel::channel_affine>(p);
      rows_by_items(c, q.outer * q.channels,
                    (flags & 1u) && q.inner % 4 == 0 ? q.inner / 4 : q.inner, g);
      return;
    }
    case Kernel::swap_axes: {
      const auto q = params<Kernel::swap_axes>(p);
      rows_by_items(c, q.outer * q.b,
                    (flags & 1u) && q.inner % 4 == 0 ? q.a * q.inner / 4 : q.a * q.inner, g);
      return;
    }
    case Kernel::im2col: {
      const auto q = params<Kernel::im2col>(p);
      rows_by_items(c, q.channels * q.kernel[0] * q.kernel[1] * q.batch, q.out_h * q.out_w, g);
      return;
    }
    case Kernel::col2im: {
      const auto q = params<Kernel::col2im>(p);
      rows_by_items(c, q.batch * q.channels, q.height * q.width, g);
      return;
    }
    case Kernel::max_pool2d: {
      const auto q = params<Kernel::max_pool2d>(p);
      g[0] = groups_for(c, uint64_t(q.planes * q.out_h * q.out_w));
      return;
    }
    case Kernel::max_pool2d_backward: {
      const auto q = params<Kernel::max_pool2d_backward>(p);
      rows_by_items(c, q.planes, q.height * q.width, g);
      return;
    }
    case Kernel::avg_pool2d: {
      const auto q = params<Kernel::avg_pool2d>(p);
      g[0] = groups_for(c, uint64_t(q.planes * q.out_h * q.out_w));
      return;
    }
    case Kernel::avg_pool2d_backward: {
      const auto q = params<Kernel::avg_pool2d_backward>(p);
      g[0] = groups_for(c, uint64_t(q.planes * q.height * q.width));
      return;
    }
  }
  throw Error(detail::cat("[execute] unknown kernel id ", int(ins.kernel), " on ", c.device));
}

namespace {

// The launch's typed params in the table's 32-bit slots (vk_params.h).
// 64-bit words travel as two slots; other integers must fit 32 bits.
void pack_params(const LaunchConfig& c, const KernelParams& p, OpParams& o) {
  const ParamLayout& l = param_layout(p.kernel());
  // Each kernel's table slots, laid out once (vk_params.h).
  static const auto all_slots = [] {
    std::array<std::array<int, kParamInts + kParamFloats>, kNumKernels> s{};
    for (int k = 0; k < kNumKernels; ++k) table_slots(param_layout(Kernel(k)), s[size_t(k)].data());
    return s;
  }();
  const int* slots = all_slots[size_t(p.kernel())].data();
  const int64_t* iv = p.int_slots();
  for (int f = 0; f < l.num_fields; ++f) {
    const ParamField& x = l.fields[f];
    if (x.kind == 'F') {
      o.f[slots[f]] = p.float_slots()[x.slot];
    } else if (x.kind == 'W') {
      uint64_t w = uint64_t(iv[x.slot]);
      o.i[slots[f]] = int32_t(uint32_t(w));
      o.i[slots[f] + 1] = int32_t(uint32_t(w >> 32));
    } else {
      for (int j = 0; j < x.count; ++j) {
        int64_t v = iv[x.slot + j];
        SY_CHECK(v >= INT32_MIN && v <= INT32_MAX, kernel_name(p.kernel()),
                 "expected parameters that fit "
                 "32 bits on ",
                 c.device, ", found ", x.name, " = ", v);
        o.i[slots[f] + j] = int32_t(v);
      }
    }
  }
}

// Launch flags beyond bit 0 (every argument 16-byte aligned), per kernel.
uint32_t kernel_flags(const LaunchConfig& c, const Instr& ins, const OpParams& o, bool aligned) {
  const KernelParams& p = ins.params;
  uint32_t fl = 0;
  switch (ins.kernel) {
    case Kernel::binary: {
      // Plain vec4 loop when a and b are laid out exactly like out.
      const auto b = params<Kernel::binary>(p);
      const int64_t* d = b.dims;
      int64_t st[4] = {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
      bool flat = true;
      for (int j = 0; j < 4; ++j)
        flat = flat && (d[j] == 1 || (b.a_strides[j] == st[j] && b.b_strides[j] == st[j]));
      if (flat) fl |= 2u;
      break;
    }
    case Kernel::gemm: {
      const auto m = params<Kernel::gemm>(p);
      int64_t lda = m.lda ? m.lda : (m.trans_a ? m.m : m.k);
      int64_t ldb = m.ldb ? m.ldb : (m.trans_b ? m.k : m.n);
      // vec4 loads need every product's operand 16-byte aligned.
      const bool one = m.batch <= 1;
      if (o.off[1] % 16 == 0 && lda % 4 == 0 && (one || m.stride_a % 4 == 0)) fl |= 4u;
      if (o.off[2] % 16 == 0 && ldb % 4 == 0 && (one || m.stride_b % 4 == 0)) fl |= 8u;
      if (m.has_bias) fl |= 16u;
      uint64_t big = ((uint64_t(m.n) + c.gemm[1] - 1) / c.gemm[1]) *
                     ((uint64_t(m.m) + c.gemm[0] - 1) / c.gemm[0]);
      if (big < 2 && c.gemm_small != c.gemm) fl |= kSmallTiles;
      break;
    }
    // Row kernels: rows of whole vec4s, every argument 16-byte aligned.
    case Kernel::softmax: {
      const auto q = params<Kernel::softmax>(p);
      if (aligned && q.cols % 4 == 0) fl |= 2u;
      if (long_rows(c, q.cols)) fl |= kRowGroups;
      break;
    }
    case Kernel::reduce_sum: {
      const auto r = params<Kernel::reduce_sum>(p);
      if (aligned && r.inner == 1 && r.len % 4 == 0) fl |= 2u;
      if (row_sums(c, r)) fl |= kRowGroups;
      break;
    }
    case Kernel::sgd_momentum_update:
      if (params<Kernel::sgd_momentum_update>(p).nesterov) fl |= 64u;
      break;
    case Kernel::transpose:
      if (transpose_tiled(c, params<Kernel::transpose>(p))) fl |= 2u;
      break;
    case Kernel::softmax_backward:
      if (long_rows(c, params<Kernel::softmax_backward>(p).cols)) fl |= kRowGroups;
      break;
    case Kernel::cross_entropy:
      if (long_rows(c, params<Kernel::cross_entropy>(p).cols)) fl |= kRowGroups;
      break;
    case Kernel::cross_entropy_backward:
      if (long_rows(c, params<Kernel::cross_entropy_backward>(p).cols)) fl |= kRowGroups;
      break;
    case Kernel::argmax:
      if (long_rows(c, params<Kernel::argmax>(p).cols)) fl |= kRowGroups;
      break;
    default:
      break;
  }
  return fl;
}

}  // namespace

// The table entry of one launch (32-bit params, offsets from each
// descriptor's start), its arguments' descriptors (kArgBindings, unused
// bindings alias argument 0) and the ranges it touches.
OpParams launch_params(const LaunchConfig& c, std::span<const Block> blocks, const Launch& l,
                       std::span<const Binding> bind, const Alloc* scratch,
                       VkDescriptorBufferInfo* desc, Range* ranges, int& nranges) {
  const Instr& ins = *l.ins;
  OpParams o{};
  bool aligned = true;
  const uint64_t align = c.storage_align;
  nranges = 0;
  for (int a = 0; a < ins.nargs; ++a) {
    const Binding& b = bind[ins.args[a].slot];
    auto* al = static_cast<const Alloc*>(b.buffer.handle);
    uint64_t off = al->offset + b.offset + ins.args[a].offset;
    uint64_t len =
        ins.args[a].bytes ? ins.args[a].bytes : b.buffer.bytes - b.offset - ins.args[a].offset;
    // The descriptor starts at an allowed alignment at or below the
    // argument and ends on a 4-byte boundary (u8 tensors are read as words).
    uint64_t start = off & ~(align - 1);
    uint64_t end = std::min<uint64_t>((off + std::max<uint64_t>(len, 1) + 15) & ~uint64_t(15),
                                      blocks[al->block].size);
    if (end - start > c.max_range)
      throw DeviceLimit(detail::cat("[", kernel_name(ins.kernel),
                                    "] expected each argument to span at most ", mib(c.max_range),
                                    " (maxStorageBufferRange of ", c.device, "), found ",
                                    end - start, " bytes: split the tensor"));
    desc[a] = {blocks[al->block].buf, start, end - start};
    o.off[a] = uint32_t(off - start);
    aligned = aligned && off % 16 == 0;
    ranges[nranges++] = {al->block, start, end, kernel_writes(ins.kernel, a)};
  }
  for (int a = ins.nargs; a < int(kArgBindings); ++a) desc[a] = desc[0], o.off[a] = o.off[0];
  if (l.scratch != kNoScratch) {
    SY_CHECK(scratch && ins.nargs <= int(kScratchArg), kernel_name(ins.kernel),
             "expected a scratch buffer and a free binding for it on ", c.device);
    const uint64_t off = scratch->offset + l.scratch;
    const uint64_t start = off & ~(align - 1), end = off + l.scratch_bytes;
    desc[kScratchArg] = {blocks[scratch->block].buf, start, end - start};
    o.off[kScratchArg] = uint32_t(off - start);
    ranges[nranges++] = {scratch->block, start, end, (l.extra_flags & kPartials) != 0};
  }
  o.aux = l.aux;
  if (kernel_has(ins.kernel, kReportsStatus)) ranges[nranges++] = {kStatusId, 0, 4, true};
  pack_params(c, ins.params, o);
  // vec4 access: every argument 16-byte aligned, and f32 (fill's dtype varies).
  if (ins.kernel == Kernel::fill && params<Kernel::fill>(ins.params).dtype != DType::f32)
    aligned = false;
  o.flags = (aligned ? 1u : 0u) | kernel_flags(c, ins, o, aligned);
  o.op = spec_op(ins);
  return o;
}

uint64_t pipeline_key(Kernel k, bool sg, int32_t spec_op, uint32_t flags) {
  return uint64_t(k) | uint64_t(sg) << 8 | uint64_t(uint32_t(spec_op) & 0xffff) << 16 |
         uint64_t(flags) << 32;
}

// The kernel's mode, as SPEC_OP documents it.
int32_t spec_op(const Instr& ins) {
  const KernelParams& p = ins.params;
  switch (ins.kernel) {
    case Kernel::gemm:
      return int32_t(params<Kernel::gemm>(p).act);
    case Kernel::fill:
      return int32_t(params<Kernel::fill>(p).dtype);
    case Kernel::arange:
      return int32_t(params<Kernel::arange>(p).dtype);
    case Kernel::cast: {
      static_assert(kNumDTypes <= 4, "cast.comp decodes SPEC_OP as from * 4 + to");
      const auto q = params<Kernel::cast>(p);
      return int32_t(q.from) * 4 + int32_t(q.to);
    }
    case Kernel::transpose:
      return int32_t(params<Kernel::transpose>(p).elem_size);
    case Kernel::unary:
      return int32_t(params<Kernel::unary>(p).op);
    case Kernel::unary_backward:
      return int32_t(params<Kernel::unary_backward>(p).op);
    case Kernel::binary:
      return int32_t(params<Kernel::binary>(p).op);
    case Kernel::softmax:
      return int32_t(params<Kernel::softmax>(p).log);
    case Kernel::softmax_backward:
      return int32_t(params<Kernel::softmax_backward>(p).log);
    default:
      return 0;
  }
}

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
    return ceil_div(u(n), inv) * (per + 1);
  };
  auto by_rows = [&](int64_t rows, int64_t per_row, uint64_t per) {  // rows_by_items' loops
    return ceil_div(u(rows), g[1]) * (ceil_div(u(per_row), uint64_t(g[0]) * c.wg) * (per + 1) + 1);
  };
  auto rowwise = [&](const auto& q, uint64_t passes) {  // softmax: short rows or a workgroup's
    if (long_rows(c, q.cols))
      return ceil_div(u(q.rows), g[0]) * (passes * (ceil_div(u(q.cols), c.wg) + red) + 1);
    return items(q.rows, passes * u(q.cols));
  };
  auto per_channel = [&](const auto& q, uint64_t passes) {  // a workgroup per channel
    return ceil_div(u(q.channels), g[0]) *
           (passes * (ceil_div(u(q.outer * q.inner), c.wg) + red) + 1);
  };
  auto taps = [](const auto& q) { return u(q.kernel[0]) * (u(q.kernel[1]) + 1); };
  auto windows = [](const auto& q) {  // of a pooling backward's element, rows x (cols + 1)
    return ceil_div(u(q.kernel[0]), u(q.stride[0])) *
           (ceil_div(u(q.kernel[1]), u(q.stride[1])) + 1);
  };
  auto per_row = [&](int64_t rows, int64_t cols, uint64_t passes, uint64_t reductions) {
    if (long_rows(c, cols))  // a workgroup per row
      return ceil_div(u(rows), g[0]) * (passes * ceil_div(u(cols), c.wg) + reductions * red + 1);
    return items(rows, passes * u(cols));
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
      const uint64_t parts = flags & kPartials ? l.aux : 1, len = ceil_div(u(q.len), parts);
      if (flags & kFinish) return items(q.outer * q.inner, l.aux);
      if (row_sums(c, q))  // a workgroup per row (and part)
        return ceil_div(u(q.outer) * parts, g[0]) * (ceil_div(len, c.wg) + red + 1);
      return items(q.outer * q.inner * int64_t(parts), len);
    }
    case Kernel::transpose: {
      const auto q = params<Kernel::transpose>(p);
      if (!(flags & 2u)) return 0;
      const uint64_t tiles = ceil_div(u(q.rows), kTile) * ceil_div(u(q.cols), kTile);
      return ceil_div(tiles, g[0]) * (2 * (ceil_div(kTile, c.wg / kTile) + 1) + 1);
    }
    case Kernel::softmax:
      return rowwise(params<Kernel::softmax>(p), 3);
    case Kernel::softmax_backward:
      return rowwise(params<Kernel::softmax_backward>(p), 2);
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
      return items(q.ranges * q.dim, u(q.n) + ceil_div(u(q.num), u(q.ranges)));
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
      if (const uint32_t n = reduce_parts(c, r); n > 1) {
        two_passes(ins, at, n, uint64_t(r.outer * r.inner) * n * sizeof(float));
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
