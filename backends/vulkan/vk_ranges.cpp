// SPDX-License-Identifier: MIT
// Tensors past maxStorageBufferRange (128 MiB on lavapipe and many mobile
// GPUs; vk_launch.h's split_by_range and split_gemm): a launch whose
// arguments would span more than one storage binding may take becomes parts
// whose arguments each start further on and are bound as ranges that fit.
#include <algorithm>

#include "switchyard/dtype.h"
#include "switchyard/error.h"
#include "vk_launch.h"

namespace switchyard::vk_impl {

uint64_t binding_room(const LaunchConfig& c) {
  return c.max_range ? c.max_range - std::min<uint64_t>(c.max_range, c.storage_align + 16) : 0;
}

namespace {

// A launch per part (its descriptor set, its table entry): a layout needing
// more (kMaxRangeParts), as a transposed operand cut element by element, is
// refused.
void check_parts(const LaunchConfig& c, Kernel k, uint64_t total) {
  if (total > uint64_t(kMaxRangeParts))
    throw DeviceLimit(detail::cat("[", kernel_name(k), "] expected at most ", kMaxRangeParts,
                                  " launches to keep each argument within ",
                                  "maxStorageBufferRange (", c.max_range, " bytes) on ", c.device,
                                  ", found ", total,
                                  " for this layout: make the operands contiguous"));
}

template <class P>
KernelParams with_n(P q, int64_t n) {
  q.n = n;
  return q;
}
template <class P>
KernelParams with_rows(P q, int64_t rows) {
  q.rows = rows;
  return q;
}

// A launch seen as `outer` runs of n items along one axis: argument a spans
// (count - 1) * step[a] + item[a] bytes for `count` items from where it
// starts (step 0: the same bytes for any count, as Adam's step counter or
// the loss gradient of cross_entropy_backward). Run o starts at o *
// outer_step[a], except for binary: it is cut along dimension k, the
// outermost longer than 1 whose slices fit in `room` bytes (a flat one is
// one row of elements first), and the dimensions outside k are the runs.
// Row kernels are runs of rows; expand is runs of its outer index, or of
// its len within each outer index when one is too long (k = 1); reduce_sum
// (outer > 1) is runs of its outer index, a single one when one passes the
// room (whole_rows: the planner splits that one along len). False for a
// launch that does not split this way.
struct Axis {
  int64_t n = 0, outer = 1;
  int k = 0;                // binary's dimension (outer: the dimensions before it); expand's axis
  bool elements = true;     // items are single elements: parts start 16-element aligned
  bool whole_rows = false;  // reduce_sum: argument 1's item may pass the room
  uint64_t step[5] = {}, item[5] = {}, outer_step[5] = {};
  BinaryParams binary{};
  int64_t out_strides[4] = {};  // binary's output, in elements
};
bool split_axis(const Instr& ins, uint64_t room, Axis& x) {
  const KernelParams& p = ins.params;
  auto flat = [&](int64_t n, std::initializer_list<uint64_t> sizes) {
    x.n = n;
    int a = 0;
    for (uint64_t z : sizes) x.step[a] = z, x.item[a++] = z ? z : 4;
    return true;
  };
  auto rows = [&](int64_t n, std::initializer_list<uint64_t> sizes) {
    x.elements = false;
    return flat(n, sizes);
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
    case Kernel::softmax: {
      const auto q = params<Kernel::softmax>(p);
      const uint64_t r = nonneg(q.cols) * 4;
      return rows(q.rows, {r, r});
    }
    case Kernel::softmax_backward: {
      const auto q = params<Kernel::softmax_backward>(p);
      const uint64_t r = nonneg(q.cols) * 4;
      return rows(q.rows, {r, r, r});
    }
    case Kernel::cross_entropy: {  // the loss is bound whole (the planner's finish writes it)
      const auto q = params<Kernel::cross_entropy>(p);
      return rows(q.rows, {0, nonneg(q.cols) * 4, 4});
    }
    case Kernel::cross_entropy_backward: {
      const auto q = params<Kernel::cross_entropy_backward>(p);
      const uint64_t r = nonneg(q.cols) * 4;
      return rows(q.rows, {r, r, 4, 0});
    }
    case Kernel::argmax:
      return rows(params<Kernel::argmax>(p).rows, {4, nonneg(params<Kernel::argmax>(p).cols) * 4});
    case Kernel::expand: {
      const auto q = params<Kernel::expand>(p);
      const uint64_t in = nonneg(q.inner) * 4, out = nonneg(q.len) * in;
      if (out <= room) return rows(q.outer, {out, in});
      // Each outer index's slice is too long: parts along len, for each one.
      x.k = 1;
      x.outer = q.outer;
      x.outer_step[0] = out, x.outer_step[1] = in;
      rows(q.len, {in, 0});
      x.item[1] = in;
      return true;
    }
    case Kernel::reduce_sum: {
      const auto q = params<Kernel::reduce_sum>(p);
      if (q.outer <= 1) return false;  // the planner binds len's ranges itself
      const uint64_t out = nonneg(q.inner) * 4, in = nonneg(q.len) * out;
      x.whole_rows = in > room;
      return rows(q.outer, {out, in});
    }
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

// The params of `count` items of a split launch.
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
    case Kernel::softmax:
      return with_rows(params<Kernel::softmax>(p), count);
    case Kernel::softmax_backward:
      return with_rows(params<Kernel::softmax_backward>(p), count);
    case Kernel::cross_entropy:
      return with_rows(params<Kernel::cross_entropy>(p), count);
    case Kernel::cross_entropy_backward:
      return with_rows(params<Kernel::cross_entropy_backward>(p), count);
    case Kernel::argmax:
      return with_rows(params<Kernel::argmax>(p), count);
    case Kernel::expand: {
      ExpandParams q = params<Kernel::expand>(p);
      (x.k ? q.len : q.outer) = count;
      if (x.k) q.outer = 1;
      return q;
    }
    case Kernel::reduce_sum: {
      ReduceSumParams q = params<Kernel::reduce_sum>(p);
      q.outer = count;
      return q;
    }
    default: {  // binary: one index of each dimension outside k
      BinaryParams q = x.binary;
      for (int j = 0; j < x.k; ++j) q.dims[j] = 1;
      q.dims[x.k] = count;
      return q;
    }
  }
}

}  // namespace

int64_t split_by_range(const LaunchConfig& c, const Instr& ins, std::vector<Instr>& parts) {
  const uint64_t room = binding_room(c);
  Axis x;
  if (c.max_range == 0 || !split_axis(ins, room, x) || x.n * x.outer < 1) return 0;
  int64_t count = x.whole_rows ? 1 : x.n;
  for (int a = 0; a < ins.nargs; ++a) {
    if (x.whole_rows && a == 1) continue;
    if (x.item[a] > room)
      throw DeviceLimit(detail::cat("[", kernel_name(ins.kernel), "] expected argument ", a,
                                    "'s innermost rows within maxStorageBufferRange (", c.max_range,
                                    " bytes) on ", c.device, ", found ", x.item[a], " bytes"));
    if (x.step[a]) count = std::min<int64_t>(count, int64_t((room - x.item[a]) / x.step[a]) + 1);
  }
  count = std::min<int64_t>(count, INT32_MAX);  // params travel as 32-bit words
  if (count >= x.n && x.outer == 1) return 0;
  if (x.elements && count > 16) count &= ~int64_t(15);  // parts start 16-element aligned
  check_parts(c, ins.kernel, uint64_t(x.outer) * ceil_div(nonneg(x.n), nonneg(count)));
  int64_t made = 0;
  for (int64_t o = 0; o < x.outer; ++o) {
    uint64_t base[5] = {};               // the run's start
    if (ins.kernel == Kernel::binary) {  // one index of each dimension outside k
      for (int64_t r = o, j = x.k - 1; j >= 0; --j) {
        const int64_t i = r % x.binary.dims[j];
        r /= x.binary.dims[j];
        base[0] += uint64_t(i * x.out_strides[j]) * 4;
        base[1] += uint64_t(i * x.binary.a_strides[j]) * 4;
        base[2] += uint64_t(i * x.binary.b_strides[j]) * 4;
      }
    } else {
      for (int a = 0; a < ins.nargs; ++a) base[a] = uint64_t(o) * x.outer_step[a];
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

// ---- GEMM ------------------------------------------------------------------------

namespace {

// A GEMM's operands as they are stored: leading dimensions, batch strides.
struct GemmLayout {
  GemmParams g;
  uint64_t M, N, K, B, lda, ldb, sa, sb, sc;
  int nargs;  // 3, or 4 with a bias
  explicit GemmLayout(const GemmParams& p, bool bias)
      : g(p),
        M(nonneg(p.m)),
        N(nonneg(p.n)),
        K(nonneg(p.k)),
        B(std::max<uint64_t>(1, nonneg(p.batch))),
        lda(nonneg(p.lda ? p.lda : (p.trans_a ? p.m : p.k))),
        ldb(nonneg(p.ldb ? p.ldb : (p.trans_b ? p.k : p.n))),
        sa(nonneg(p.stride_a)),
        sb(nonneg(p.stride_b)),
        sc(nonneg(p.stride_c)),
        nargs(bias ? 4 : 3) {}
  // A block of bb products, mb rows, nb columns and kb of K: the elements
  // argument a spans (C's rows are N apart).
  uint64_t span(int a, uint64_t bb, uint64_t mb, uint64_t nb, uint64_t kb) const {
    kb = std::max<uint64_t>(kb, 1);
    switch (a) {
      case 0:
        return (bb - 1) * sc + (mb - 1) * N + nb;
      case 1:
        return (bb - 1) * sa + (g.trans_a ? (kb - 1) * lda + mb : (mb - 1) * lda + kb);
      case 2:
        return (bb - 1) * sb + (g.trans_b ? (nb - 1) * ldb + kb : (kb - 1) * ldb + nb);
      default:
        return g.bias_rows ? (bb - 1) * M + mb : nb;
    }
  }
};

}  // namespace

bool gemm_fits_bindings(const LaunchConfig& c, const GemmParams& g, bool bias) {
  const GemmLayout L(g, bias);
  const uint64_t room = binding_room(c) / 4;
  if (!room || L.M == 0 || L.N == 0) return true;
  for (int a = 0; a < L.nargs; ++a)
    if (L.span(a, L.B, L.M, L.N, L.K) > room) return false;
  return true;
}

size_t split_gemm(const LaunchConfig& c, const Instr& ins, uint32_t at, int64_t k_part,
                  uint32_t flags, std::vector<Launch>& out, std::vector<Instr>& parts) {
  const GemmParams g = params<Kernel::gemm>(ins.params);
  const bool bias = g.has_bias && ins.nargs > 3;
  const GemmLayout L(g, bias);
  const uint64_t M = L.M, N = L.N, K = L.K, B = L.B;
  if (M == 0 || N == 0) return 0;
  const uint64_t lda = L.lda, ldb = L.ldb, sa = L.sa, sb = L.sb, sc = L.sc;
  auto span_of = [&](int a, uint64_t bb, uint64_t mb, uint64_t nb, uint64_t kb) {
    return L.span(a, bb, mb, nb, kb);
  };
  uint64_t bb = B, mb = M, nb = N, kb = std::max<uint64_t>(K, 1);
  auto span = [&](int a) { return span_of(a, bb, mb, nb, kb); };
  const int nargs = L.nargs;
  const uint64_t room = binding_room(c) / 4;  // elements
  auto fits = [&] {
    for (int a = 0; a < nargs; ++a)
      if (span(a) > room) return false;
    return true;
  };
  bool by_range = false;
  if (room && !fits()) {
    by_range = true;
    // Whole products first: as many as fit in every binding.
    bb = 1;
    if (fits()) {
      const uint64_t one[4] = {span(0), span(1), span(2), nargs > 3 ? span(3) : 0};
      const uint64_t step[4] = {sc, sa, sb, g.bias_rows ? M : 0};
      uint64_t most = B;
      for (int a = 0; a < nargs; ++a)
        if (step[a]) most = std::min(most, (room - one[a]) / step[a] + 1);
      bb = std::max<uint64_t>(1, most);
    } else {
      // One product passes it: blocks of it. Each operand's span is
      // (major - 1) * ld + minor: its major dimension is cut first, its
      // minor one only when a single major index is too long. Cutting one
      // operand's dimensions only shrinks the others' spans.
      auto cut = [&](uint64_t& major, uint64_t& minor, uint64_t ld) {
        if (minor > room) {
          minor = room;
          major = 1;
        } else {
          major = std::min(major, (room - minor) / std::max<uint64_t>(ld, 1) + 1);
        }
      };
      if (g.trans_a)
        cut(kb, mb, lda);
      else
        cut(mb, kb, lda);
      if (g.trans_b)
        cut(nb, kb, ldb);
      else
        cut(kb, nb, ldb);
      cut(mb, nb, N);
      if (bias) (g.bias_rows ? mb : nb) = std::min(g.bias_rows ? mb : nb, room);
      // A cut dimension in whole tiles and BK steps, 16-byte aligned
      // operands (vec4 loads); one left whole stays whole.
      auto round = [](uint64_t& v, uint64_t whole, uint64_t to) {
        if (v < whole && v > to) v -= v % to;
      };
      round(mb, M, c.gemm[0]);
      round(nb, N, c.gemm[1]);
      round(kb, std::max<uint64_t>(K, 1), c.gemm[2]);
    }
  }
  // The launches the range asks for (the loop budget's parts of K aside:
  // those a GEMM on such a driver takes anyway).
  if (by_range)
    check_parts(c, Kernel::gemm,
                ceil_div(B, bb) * ceil_div(M, mb) * ceil_div(N, nb) * (K ? ceil_div(K, kb) : 1));
  if (k_part > 0) kb = std::min(kb, uint64_t(k_part));
  if (!by_range && kb >= K) return 0;
  const uint64_t nk = K ? ceil_div(K, kb) : 1;
  SY_CHECK(N <= UINT32_MAX, "gemm", "expected at most 2^32 - 1 columns on ", c.device, ", found ",
           N);
  size_t made = 0;
  for (uint64_t b0 = 0; b0 < B; b0 += bb)
    for (uint64_t i0 = 0; i0 < M; i0 += mb)
      for (uint64_t j0 = 0; j0 < N; j0 += nb)
        for (uint64_t z = 0; z < nk; ++z, ++made) {
          const uint64_t k0 = z * kb;
          GemmParams q = g;
          q.m = int64_t(std::min(mb, M - i0));
          q.n = int64_t(std::min(nb, N - j0));
          q.k = int64_t(std::min(kb, K - std::min(K, k0)));
          if (g.batch > 1) q.batch = int64_t(std::min(bb, B - b0));
          q.lda = int64_t(lda);
          q.ldb = int64_t(ldb);
          q.has_bias = g.has_bias && z == 0;    // the first part adds the bias
          if (z + 1 < nk) q.act = Unary::none;  // the last applies the activation
          // Each argument's first element of the block, and its span.
          const uint64_t first[4] = {b0 * sc + i0 * N + j0,
                                     b0 * sa + (g.trans_a ? k0 * lda + i0 : i0 * lda + k0),
                                     b0 * sb + (g.trans_b ? j0 * ldb + k0 : k0 * ldb + j0),
                                     g.bias_rows ? b0 * M + i0 : j0};
          Instr& part = parts.emplace_back(ins);
          part.params = q;
          for (int a = 0; a < ins.nargs; ++a) {
            Arg& arg = part.args[size_t(a)];
            if (a >= nargs) {  // an unused bias: bound, not read
              arg.bytes = 4;
              continue;
            }
            // Bytes per element: 2 for 16-bit A, B and C (the element
            // room above counts 4 for every operand: a 16-bit one fits
            // twice).
            const uint64_t es = a == 0               ? dtype_size(g.c_dtype)
                                : (a == 1 || a == 2) ? dtype_size(g.ab_dtype)
                                                     : 4;
            arg.offset += first[a] * es;
            arg.bytes = span_of(a, uint64_t(std::max<int64_t>(q.batch, 1)), uint64_t(q.m),
                                uint64_t(q.n), uint64_t(q.k)) *
                        es;
          }
          // aux: C's row stride when the block is narrower than C.
          out.push_back(
              {nullptr, flags | (z ? kGemmAccumulate : 0u), at, q.n < g.n ? uint32_t(N) : 0u});
          out.back().part = int64_t(parts.size() - 1);
        }
  return made;
}

}  // namespace switchyard::vk_impl
