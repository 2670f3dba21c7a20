// SPDX-License-Identifier: MIT
// Launch translation (see vk_launch.h); the planning of a Program's
// launches is in vk_plan.cpp.
#include "vk_launch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "switchyard/backend/custom.h"
#include "switchyard/dtype.h"
#include "switchyard/error.h"
#include "vk_gemm.h"
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

// One workgroup per row, grid-stride over rows.
uint32_t row_groups(const LaunchConfig& c, int64_t rows) {
  return uint32_t(std::clamp<int64_t>(rows, 1, c.grid_cap));
}

}  // namespace

bool long_rows(const LaunchConfig& c, int64_t cols) { return cols > c.short_row; }
uint32_t rowwise_groups(const LaunchConfig& c, int64_t rows, int64_t cols) {
  return long_rows(c, cols) ? row_groups(c, rows) : groups_for(c, nonneg(rows));
}
bool row_sums(const LaunchConfig& c, const ReduceSumParams& r) {
  return r.inner == 1 && long_rows(c, r.len);
}

bool binary_flat(const BinaryParams& b) {
  const int64_t* d = b.dims;
  const int64_t st[4] = {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  for (int j = 0; j < 4; ++j)
    if (d[j] != 1 && (b.a_strides[j] != st[j] || b.b_strides[j] != st[j])) return false;
  return true;
}

bool conv_kernel(Kernel k) {
  return k == Kernel::conv2d || k == Kernel::conv2d_backward_input ||
         k == Kernel::conv2d_backward_weight;
}

ConvGemm conv_gemm(const Instr& ins) {
  auto dims = [](const auto& q) {
    const int64_t OH =
        conv_out_size(q.height, q.kernel[0], q.stride[0], q.padding[0], q.dilation[0]);
    const int64_t OW =
        conv_out_size(q.width, q.kernel[1], q.stride[1], q.padding[1], q.dilation[1]);
    const uint64_t G = std::max<uint64_t>(1, nonneg(q.groups));
    struct D {
      uint64_t G, Cg, OCg, KK, P, HW, N;
    };
    return D{G,
             nonneg(q.channels) / G,
             nonneg(q.out_channels) / G,
             nonneg(q.kernel[0]) * nonneg(q.kernel[1]),
             nonneg(OH) * nonneg(OW),
             nonneg(q.height) * nonneg(q.width),
             nonneg(q.batch)};
  };
  switch (ins.kernel) {
    case Kernel::conv2d: {
      const auto d = dims(params<Kernel::conv2d>(ins.params));
      return {d.OCg, d.N * d.P, d.Cg * d.KK, d.G};
    }
    case Kernel::conv2d_backward_input: {
      const auto d = dims(params<Kernel::conv2d_backward_input>(ins.params));
      return {d.Cg, d.N * d.HW, d.OCg * d.KK, d.G};
    }
    case Kernel::conv2d_backward_weight: {
      const auto q = params<Kernel::conv2d_backward_weight>(ins.params);
      const auto d = dims(q);
      const uint64_t splits = std::max<uint64_t>(1, nonneg(q.splits));
      return {d.OCg, d.Cg * d.KK, ceil_div(d.N * d.P, splits), d.G * splits};
    }
    default:
      throw Error(
          detail::cat("[", kernel_name(ins.kernel), "] not a convolution (internal error)"));
  }
}

const std::array<uint32_t, 5>& conv_tiles(const LaunchConfig& c, uint32_t flags) {
  return flags & kTallTiles     ? c.gemm_tall
         : flags & kNarrowTiles ? c.gemm_narrow
         : flags & kSmallTiles  ? c.gemm_small
                                : c.gemm;
}

bool transpose_tiled(const LaunchConfig& c, const TransposeParams& t) {
  return c.tiled_transpose && (t.elem_size == 4 || t.elem_size == 8) && t.rows >= kTile &&
         t.cols >= kTile;
}

// Enough to fill the device and no more, since each ends in a workgroup sum
// (on lavapipe 410 workgroups of 256 rows took 1.8 times as long as one
// workgroup of all 104857).
uint32_t cross_entropy_groups(const LaunchConfig& c, const CrossEntropyParams& q) {
  const uint32_t fit = uint32_t(std::min<uint64_t>(c.scratch_bytes / 8, kMaxGroups));
  return std::min({rowwise_groups(c, q.rows, q.cols), c.fill_groups, fit});
}

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
    case Kernel::dropout:
      g[0] = groups_for(c, uint64_t(params<Kernel::dropout>(p).n));
      return;
    case Kernel::cast:
      g[0] = groups_for(c, uint64_t(params<Kernel::cast>(p).n));
      return;
    case Kernel::transpose: {
      const auto t = params<Kernel::transpose>(p);
      g[0] = flags & 2u ? row_groups(c, int64_t(ceil_div(nonneg(t.rows), kTile) *
                                                ceil_div(nonneg(t.cols), kTile)))
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
      g[0] = flags & kFinish  ? groups_for(c, nonneg(r.outer * r.inner))
             : row_sums(c, r) ? rows(items)
                              : groups_for(c, nonneg(items));
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
      g[0] = flags & kFinish     ? 1
             : flags & kPartials ? aux  // the planner's count (a part's share of the scratch)
                                 : cross_entropy_groups(c, params<Kernel::cross_entropy>(p));
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
      const auto& t = gemm_tiles(c, flags);
      if (flags & kFinish) {  // a split's second pass: a grid-stride loop over the outputs
        const uint64_t outputs = nonneg(m.m) * nonneg(m.n) * std::max<uint64_t>(1, nonneg(m.batch));
        const uint64_t wg = (t[0] / t[3]) * (t[1] / t[4]);
        g[0] = uint32_t(std::clamp<uint64_t>(ceil_div(outputs, wg), 1, c.grid_cap));
        return;
      }
      uint64_t gx = (uint64_t(m.n) + t[1] - 1) / t[1], gy = (uint64_t(m.m) + t[0] - 1) / t[0];
      SY_CHECK(gx <= kMaxGroups && gy <= kMaxGroups, "gemm", "expected at most ", kMaxGroups * t[0],
               " rows and columns on ", c.device, ", found ", m.m, "x", m.n);
      // A split's first pass: every part of K of every product.
      const uint64_t gz = uint64_t(std::max<int64_t>(m.batch, 1)) * (flags & kPartials ? aux : 1);
      SY_CHECK(gz <= kMaxGroups, "gemm", "expected at most ", kMaxGroups,
               " batched products (times parts of K) on ", c.device, ", found ", gz);
      g[0] = uint32_t(std::max<uint64_t>(gx, 1));
      g[1] = uint32_t(std::max<uint64_t>(gy, 1));
      g[2] = uint32_t(gz);
      return;
    }
    case Kernel::channel_stats:
      g[0] = rows(params<Kernel::channel_stats>(p).channels);
      return;
    case Kernel::batch_norm_coef:
      g[0] = groups_for(c, uint64_t(params<Kernel::batch_norm_coef>(p).channels));
      return;
    case Kernel::batch_norm_coef_backward:
      g[0] = groups_for(c, uint64_t(params<Kernel::batch_norm_coef_backward>(p).channels));
      return;
    case Kernel::batch_norm_running:
      g[0] = groups_for(c, uint64_t(params<Kernel::batch_norm_running>(p).channels));
      return;
    case Kernel::channel_sums:
      g[0] = rows(params<Kernel::channel_sums>(p).channels);
      return;
    case Kernel::channel_affine: {  // flat: vec4 items (or groups of 4 elements)
      const auto q = params<Kernel::channel_affine>(p);
      g[0] = groups_for(c, quads(q.outer * q.channels * q.inner));
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
    case Kernel::conv2d:
    case Kernel::conv2d_backward_input:
    case Kernel::conv2d_backward_weight: {
      const auto& t = conv_tiles(c, flags);
      const ConvGemm m = conv_gemm(ins);
      const bool tall = flags & kTallTiles;  // pixels as rows, channels as columns
      const uint64_t gx = ceil_div(tall ? m.m : m.n, t[1]), gy = ceil_div(tall ? m.n : m.m, t[0]);
      SY_CHECK(gx <= kMaxGroups && gy <= kMaxGroups && m.z <= kMaxGroups, kernel_name(ins.kernel),
               "expected at most ", kMaxGroups, " workgroups along each dimension on ", c.device,
               ", found ", gx, " x ", gy, " x ", m.z, ": split the batch");
      g[0] = uint32_t(std::max<uint64_t>(gx, 1));
      g[1] = uint32_t(std::max<uint64_t>(gy, 1));
      g[2] = uint32_t(std::max<uint64_t>(m.z, 1));
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
    case Kernel::custom: {  // the user's grid function's
      const auto q = params<Kernel::custom>(p);
      for (int j = 0; j < 3; ++j) g[j] = uint32_t(q.grid[j]);
      return;
    }
    case Kernel::adam_multi:  // aux: the update's pieces, the finish's tensors (vk_multi.cpp)
    case Kernel::sgd_multi:
      g[0] = uint32_t(
          std::clamp<uint64_t>(flags & kFinish ? ceil_div(aux, c.wg) : aux, 1, c.grid_cap));
      return;
  }
  throw Error(detail::cat("[execute] unknown kernel id ", int(ins.kernel), " on ", c.device));
}

// The launch's typed params in the table's 32-bit slots (vk_params.h).
// 64-bit words travel as two slots; other integers must fit 32 bits.
void pack_params(const LaunchConfig& c, const KernelParams& p, OpParams& o) {
  if (p.kernel() == Kernel::custom) {  // the user's struct, as its bytes (SY_PARAMS)
    static_assert(sizeof(o.i) + sizeof(o.f) >= kCustomParamBytes);
    custom_impl::param_bytes(params<Kernel::custom>(p), reinterpret_cast<unsigned char*>(o.i));
    return;
  }
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

namespace {

// The kernels that divide by reciprocals (common.glsl's SY_QDIV), exact
// below 2^22: flag bit 2 (integer division) when a dividend reaches the
// device's limit.
uint32_t reciprocal_flag(const LaunchConfig& c, uint64_t most) {
  return most >= c.reciprocal_limit ? 4u : 0u;
}

// Launch flags beyond bit 0 (every argument 16-byte aligned), per kernel.
uint32_t kernel_flags(const LaunchConfig& c, const Instr& ins, const OpParams& o, bool aligned) {
  const KernelParams& p = ins.params;
  uint32_t fl = 0;
  switch (ins.kernel) {
    case Kernel::binary:  // plain vec4 loop when a and b are laid out exactly like out
      if (binary_flat(params<Kernel::binary>(p))) fl |= 2u;
      break;
    case Kernel::gemm: {
      const auto m = params<Kernel::gemm>(p);
      int64_t lda = m.lda ? m.lda : (m.trans_a ? m.m : m.k);
      int64_t ldb = m.ldb ? m.ldb : (m.trans_b ? m.k : m.n);
      // vec4 loads need every product's operand 16-byte aligned (and f32:
      // 16-bit operands are read as halves of words).
      const bool one = m.batch <= 1, half = is_half(m.ab_dtype);
      if (half) fl |= kGemmHalf | (m.ab_dtype == DType::f16 ? kGemmF16 : 0u);
      if (is_half(m.c_dtype)) fl |= kGemmHalfC | (m.c_dtype == DType::f16 ? kGemmF16C : 0u);
      if (!half && o.off[1] % 16 == 0 && lda % 4 == 0 && (one || m.stride_a % 4 == 0)) fl |= 4u;
      if (!half && o.off[2] % 16 == 0 && ldb % 4 == 0 && (one || m.stride_b % 4 == 0)) fl |= 8u;
      if (m.has_bias) fl |= 16u;
      break;  // the variant's flags are the planner's (vk_gemm.h)
    }
    case Kernel::conv2d:
    case Kernel::conv2d_backward_input:
    case Kernel::conv2d_backward_weight: {
      if (ins.kernel == Kernel::conv2d && params<Kernel::conv2d>(p).has_bias) fl |= 16u;
      // Unit strides: the input gradient's taps need no divisibility test
      // (conv_gemm.glsl's UNIT_STRIDE, settled when the pipeline is built).
      if (ins.kernel == Kernel::conv2d_backward_input) {
        const auto q = params<Kernel::conv2d_backward_input>(p);
        if (q.stride[0] == 1 && q.stride[1] == 1) fl |= 32u;
      }
      // The tile set that wastes least: each set's padded product over the
      // multiply-adds per vec4 an invocation loads from shared memory
      // (TM*TN / (TM/4 + TN/4), or TM*TN / (1 + TN/4) when the subgroup build
      // shares A's loads). Tall tiles run transposed: pixels on the rows. The
      // small set always when the large one leaves the device without a
      // second workgroup.
      const ConvGemm m = conv_gemm(ins);
      // The decoding's largest dividends: pixels, or a weight gradient's k
      // over all its splits.
      fl |= reciprocal_flag(c, std::max(m.n, m.k * m.z));
      auto cost = [&](const std::array<uint32_t, 5>& t, bool tall) {
        const uint64_t rows = tall ? m.n : m.m, cols = tall ? m.m : m.n;
        const double padded = double(ceil_div(rows, t[0]) * t[0] * ceil_div(cols, t[1]) * t[1]);
        return padded * double((c.shared_a_loads ? 1 : t[3] / 4) + t[4] / 4) / double(t[3] * t[4]);
      };
      const bool one_tile = ceil_div(m.n, c.gemm[1]) * ceil_div(m.m, c.gemm[0]) * m.z < 2;
      double best = one_tile ? 1e300 : cost(c.gemm, false);
      if (c.gemm_small != c.gemm && cost(c.gemm_small, false) < best)
        best = cost(c.gemm_small, false), fl |= kSmallTiles;
      if (c.conv_narrow && cost(c.gemm_narrow, false) < best)
        best = cost(c.gemm_narrow, false), fl = (fl & ~kSmallTiles) | kNarrowTiles;
      if (c.conv_tall && cost(c.gemm_tall, true) < best)
        fl = (fl & ~(kSmallTiles | kNarrowTiles)) | kTallTiles;
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
    case Kernel::channel_affine: {
      const auto q = params<Kernel::channel_affine>(p);
      if (q.has_b) fl |= 2u;
      fl |= reciprocal_flag(c, uint64_t(q.outer * q.channels * q.inner));
      if (q.relu) fl |= 8u;
      if (q.relu_mask) fl |= 16u;
      break;
    }
    case Kernel::channel_stats: {
      const auto q = params<Kernel::channel_stats>(p);
      fl |= reciprocal_flag(c, uint64_t(q.outer * q.inner));
      break;
    }
    case Kernel::channel_sums: {
      const auto q = params<Kernel::channel_sums>(p);
      fl |= reciprocal_flag(c, uint64_t(q.outer * q.inner));
      break;
    }
    case Kernel::max_pool2d: {
      const auto q = params<Kernel::max_pool2d>(p);
      fl |= reciprocal_flag(c, uint64_t(q.planes * q.out_h * q.out_w));
      break;
    }
    case Kernel::max_pool2d_backward: {  // a plane's elements, padded
      const auto q = params<Kernel::max_pool2d_backward>(p);
      fl |= reciprocal_flag(c, uint64_t((q.height + q.padding[0]) * (q.width + q.padding[1])));
      break;
    }
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
      throw DeviceLimit(detail::cat("[", custom_impl::display_name(ins.params),
                                    "] expected each argument to span at most ", c.max_range,
                                    " bytes (maxStorageBufferRange of ", c.device, "), found ",
                                    end - start, " bytes: split the tensor"));
    desc[a] = {blocks[al->block].buf, start, end - start};
    o.off[a] = uint32_t(off - start);
    aligned = aligned && off % 16 == 0;
    const bool custom = ins.kernel == Kernel::custom;
    // A custom kernel indexes its arguments from 0: each starts its binding
    // (the runtime aligns them, custom.cpp).
    SY_CHECK(!custom || off == start, custom_impl::display_name(ins.params).c_str(),
             "expected argument ", a, " at an offset aligned to ", align, " bytes on ", c.device,
             ", found offset ", off, " (internal error)");
    const bool writes =
        custom ? a < params<Kernel::custom>(ins.params).outputs : kernel_writes(ins.kernel, a);
    ranges[nranges++] = {al->block, start, end, writes};
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
    case Kernel::conv2d:
      return int32_t(params<Kernel::conv2d>(p).act);
    case Kernel::fill:
      return int32_t(params<Kernel::fill>(p).dtype);
    case Kernel::arange:
      return int32_t(params<Kernel::arange>(p).dtype);
    case Kernel::cast: {
      static_assert(kNumDTypes <= 8, "cast.comp decodes SPEC_OP as from * 8 + to");
      const auto q = params<Kernel::cast>(p);
      return int32_t(q.from) * 8 + int32_t(q.to);
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

}  // namespace switchyard::vk_impl
