// SPDX-License-Identifier: MIT
// Layers beyond the MLP: batched matmul, convolution, pooling and batch norm.
// Each checks its inputs, builds nodes of the kernel table and records its
// backward next to the forward.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "conv_geometry.h"
#include "graph.h"
#include "ops_internal.h"
#include "switchyard/error.h"
#include "switchyard/ops.h"

namespace switchyard {
using namespace detail;

namespace {

// The params of a kernel whose field list is another's (a forward and its
// backward share one geometry: kernels.h defines the one list as the other).
template <class To, class From>
To same_fields(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "kernels of one field list");
  return std::bit_cast<To>(from);
}

// A GEMM node over `batch` (at least 1) products of the given strides; 16-bit
// operands (native_half_gemm) give their dtype, the f32 sums rounded once.
Tensor gemm_node(std::initializer_list<Tensor> in, Shape out, GemmParams p) {
  if (p.batch == 0) p.batch = 1;  // a single product
  p.alpha = 1.f;
  p.ab_dtype = in.begin()->dtype();
  p.c_dtype = gemm_out_dtype(*in.begin(), p);
  return node(in, std::move(out), p.c_dtype, p).to(p.ab_dtype);  // (no-op when written so)
}

}  // namespace

// ---- transpose of any two dimensions ----------------------------------------------

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  const char* op = "transpose";
  check_defined(op, x);
  if (is_half(x.dtype())) return transpose(x.to(DType::f32), d0, d1).to(x.dtype());
  SY_CHECK(x.dim() >= 1, op, "expected at least 1 dimension, found a scalar");
  int64_t a = norm_axis(op, x, d0), b = norm_axis(op, x, d1);
  if (a == b) return x;
  if (a > b) std::swap(a, b);
  SY_CHECK(dtype_size(x.dtype()) == 4, op, "expected a 4-byte dtype (f32, i32), found ",
           dtype_name(x.dtype()));
  const Shape& s = x.shape();
  auto span = [&](int64_t from, int64_t to) {  // the product of dims [from, to)
    int64_t p = 1;
    for (int64_t i = from; i < to; ++i) p *= s[i];
    return p;
  };
  Shape out = s;
  std::swap(out[a], out[b]);
  const int64_t outer = span(0, a), mid = span(a + 1, b), inner = span(b + 1, x.dim());
  Tensor y;
  if (mid == 1) {  // neighbours (or only 1-sized dims between): one swap
    y = node({x}, out, x.dtype(),
             SwapAxesParams{.outer = outer, .a = s[a], .b = s[b], .inner = inner});
  } else {  // dim b in front of [a, b), then dim a behind the ones between
    Tensor t = node({x}, {outer, s[b], s[a] * mid, inner}, x.dtype(),
                    SwapAxesParams{.outer = outer, .a = s[a] * mid, .b = s[b], .inner = inner});
    y = node({t}, out, x.dtype(),
             SwapAxesParams{.outer = outer * s[b], .a = s[a], .b = mid, .inner = inner});
  }
  return with_grad(y, op, {x},
                   [a, b](const Tensor& g) { return std::vector<Tensor>{transpose(g, a, b)}; });
}

// ---- embedding ---------------------------------------------------------------------

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  if (weight.defined() && is_half(weight.dtype()))
    return embedding(indices, weight.to(DType::f32)).to(weight.dtype());
  const char* op = "embedding";
  check_defined(op, indices);
  check_f32(op, weight);
  check_same_device(op, indices, weight);
  SY_CHECK(weight.dim() == 2 && weight.size(1) > 0, op,
           "expected a weight of shape (num_embeddings, dim) with dim > 0, found ",
           shape_str(weight.shape()));
  SY_CHECK(indices.dtype() == DType::i32 || indices.dtype() == DType::i64, op,
           "expected i32 or i64 indices, found ", dtype_name(indices.dtype()));
  const int64_t n = indices.numel(), num = weight.size(0), dim = weight.size(1);
  SY_CHECK(num < (int64_t(1) << 31), op, "expected fewer than 2^31 embeddings, found ", num);
  // i64 indices convert saturating: one past i32's range stays out of range
  // (the kernel reports it) rather than wrapping into a valid one.
  Tensor idx =
      indices.dtype() == DType::i32 ? indices.reshape({n}) : indices.reshape({n}).to(DType::i32);
  // The backward's invocations: about 64K (ranges of rows x dim), each
  // reading all n indices.
  const int64_t ranges =
      std::clamp<int64_t>(65536 / std::max<int64_t>(dim, 1), 1, std::max<int64_t>(num, 1));
  const EmbeddingParams p{.n = n, .num = num, .dim = dim, .ranges = ranges};
  Shape out = indices.shape();
  out.push_back(dim);
  Tensor y = node({weight, idx}, out, DType::f32, p);
  Tensor id = idx.detach();
  return with_grad(y, op, {weight}, [=](const Tensor& g) {
    return std::vector<Tensor>{node({g.reshape({n, dim}), id}, {num, dim}, DType::f32,
                                    same_fields<EmbeddingBackwardParams>(p))};
  });
}

// ---- cat -------------------------------------------------------------------------

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  {
    bool any = false, same = true;
    for (const Tensor& t : ts) {
      any = any || (t.defined() && is_half(t.dtype()));
      same = same && t.defined() && t.dtype() == ts.front().dtype();
    }
    if (any) {
      std::vector<Tensor> wide;
      for (const Tensor& t : ts) wide.push_back(widen(t));
      return narrow(cat(wide, dim), same ? ts.front().dtype() : DType::f32);
    }
  }
  const char* op = "cat";
  SY_CHECK(!ts.empty(), op, "expected at least one tensor, found none");
  SY_CHECK(dim == 0, op, "only dim 0 is supported, found dim ", dim);
  const Tensor& first = ts.front();
  check_f32(op, first);
  SY_CHECK(first.dim() >= 1, op, "expected tensors with at least 1 dimension, found a scalar");
  if (ts.size() == 1) return first;
  const Shape tail(first.shape().begin() + 1, first.shape().end());
  int64_t rows = 0, total = 0;
  for (const Tensor& t : ts) {
    check_f32(op, t);
    check_same_device(op, first, t);
    SY_CHECK(t.dim() == first.dim() && Shape(t.shape().begin() + 1, t.shape().end()) == tail, op,
             "expected tensors of shape (*", tail.empty() ? ")" : "," + shape_str(tail).substr(1),
             ", found ", shape_str(t.shape()));
    rows += t.size(0);
    total += t.numel();
  }
  Tensor out;
  int64_t row = 0, element = 0;
  std::vector<int64_t> starts;  // first row of each
  for (const Tensor& t : ts) {
    starts.push_back(row);
    Tensor placed = node({t}, {total}, DType::f32,
                         PadParams{.begin = element, .len = t.numel(), .total = total});
    NoGradGuard no_grad;  // the gradient is recorded for the whole below
    out = out.defined() ? out + placed : placed;
    row += t.size(0);
    element += t.numel();
  }
  Shape shape = first.shape();
  shape[0] = rows;
  out = out.reshape(shape);
  std::vector<int64_t> lens;
  for (const Tensor& t : ts) lens.push_back(t.size(0));
  return with_grad(out, op, ts, [starts, lens](const Tensor& g) {
    std::vector<Tensor> r;
    for (size_t i = 0; i < starts.size(); ++i) r.push_back(g.slice(starts[i], starts[i] + lens[i]));
    return r;
  });
}

// ---- batched matmul ------------------------------------------------------------

static Tensor bmm_t(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const int64_t B = a.size(0);
  const int64_t M = ta ? a.size(2) : a.size(1), K = ta ? a.size(1) : a.size(2);
  const int64_t N = tb ? b.size(1) : b.size(2);
  if (B == 0) return zeros({0, M, N}, Options(a.device()).dtype(a.dtype()));  // no product to run
  GemmParams p{.m = M,
               .n = N,
               .k = K,
               .trans_a = ta,
               .trans_b = tb,
               .batch = B,
               .stride_a = M * K,
               .stride_b = K * N,
               .stride_c = M * N};
  Tensor out = gemm_node({a, b}, {B, M, N}, p);
  Tensor ad = a.detach(), bd = b.detach();
  return with_grad(out, "bmm", {a, b}, [ad, bd, ta, tb](const Tensor& g) {
    Tensor ga = ta ? bmm_t(bd, g, tb, true) : bmm_t(g, bd, false, !tb);
    Tensor gb = tb ? bmm_t(g, ad, true, ta) : bmm_t(ad, g, !ta, false);
    return std::vector<Tensor>{ga, gb};
  });
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (auto d = autocast_cast({&a, &b})) return bmm(cast_to(a, *d), cast_to(b, *d));
  const std::optional<DType> h = half_inputs({&a, &b});
  const bool native = native_half_gemm(h, a, b);
  if (h && !native) {
    AutocastOff off;  // the f32 computation is not autocast again
    return narrow(bmm(widen(a), widen(b)), *h);
  }
  const char* op = "bmm";
  if (!native) {
    check_f32(op, a);
    check_f32(op, b);
  }
  check_same_device(op, a, b);
  SY_CHECK(a.dim() == 3 && b.dim() == 3, op, "expected 3-D tensors (batch, rows, cols), found ",
           shape_str(a.shape()), " and ", shape_str(b.shape()));
  SY_CHECK(a.size(0) == b.size(0), op, "expected the same batch size, found ", shape_str(a.shape()),
           " and ", shape_str(b.shape()));
  SY_CHECK(a.size(2) == b.size(1), op, "shapes ", shape_str(a.shape()), " and ",
           shape_str(b.shape()), " cannot be multiplied: inner dims ", a.size(2),
           " != ", b.size(1));
  return bmm_t(a, b, false, false);
}

// ---- convolution ---------------------------------------------------------------
// Three kernels, each an implicit GEMM per group that reads its operands in
// place (kernels.h): conv2d forward (bias fused), conv2d_backward_input
// (dx gathered per element) and conv2d_backward_weight (dW in `splits`
// partial sums over the batch's pixels, added by one reduction). Nothing
// is expanded into an im2col matrix and no layout pass runs: a convolution
// is one launch forward and two or three backward.

namespace {

// The number of partial sums of the weight gradient: one per about 1024 of
// the K = N*OH*OW positions (a GPU needs the parallelism: dW itself is a
// few tiles; a CPU driver bounds an invocation's loop iterations), at most
// 64. The same on every backend's own kernels, so they add in the same
// order. A device whose convolutions run through a library that reduces over the
// batch itself (cuDNN: the property "conv_weight_gradient" = "whole") gets
// one sum.
int64_t conv_wgrad_splits(const Device& d, int64_t positions) {
  for (const auto& [key, value] : d.info().properties)
    if (key == "conv_weight_gradient" && value == "whole") return 1;
  return std::clamp<int64_t>((positions + 1023) / 1024, 1, 64);
}

// The im2col lowering: x (N, C, H, W) -> cols (C*KH*KW, N*OH*OW) by im2col;
// per group g one GEMM W_g (OC/G, C/G*KH*KW) x cols_g, all G in one batched
// launch with the bias added per row, giving (OC, N*OH*OW); then NCHW by
// swap_axes. One GEMM over the whole batch keeps its N dimension large.
Tensor conv2d_im2col(const Tensor& x, const Tensor& w, const Tensor& b, Size2 stride, Size2 padding,
                     Size2 dilation, int64_t groups, int64_t OH, int64_t OW) {
  const char* op = "conv2d";
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), K0 = w.size(2), K1 = w.size(3);
  Im2colParams ip{.batch = N,
                  .channels = C,
                  .height = H,
                  .width = W,
                  .kernel = {K0, K1},
                  .stride = {stride.h, stride.w},
                  .padding = {padding.h, padding.w},
                  .dilation = {dilation.h, dilation.w},
                  .out_h = OH,
                  .out_w = OW};
  const int64_t G = groups, OCg = OC / G, CKg = C / G * K0 * K1, NP = N * OH * OW;
  Tensor cols = node({x}, {C * K0 * K1, NP}, DType::f32, ip);
  GemmParams fp{.m = OCg,
                .n = NP,
                .k = CKg,
                .has_bias = b.defined(),
                .bias_rows = true,
                .batch = G,
                .stride_a = OCg * CKg,
                .stride_b = CKg * NP,
                .stride_c = OCg * NP};
  Tensor yc =
      b.defined() ? gemm_node({w, cols, b}, {OC, NP}, fp) : gemm_node({w, cols}, {OC, NP}, fp);
  Tensor y = node({yc}, {N, OC, OH, OW}, DType::f32,
                  SwapAxesParams{.outer = 1, .a = OC, .b = N, .inner = OH * OW});
  Tensor wd = w.detach();
  const Shape xs = x.shape(), ws = w.shape();
  const bool has_b = b.defined();
  auto bw = [=](const Tensor& g) {
    // (N, OC, OH*OW) -> (OC, N*OH*OW), the GEMM's layout.
    Tensor gc = node({g}, {OC, NP}, DType::f32,
                     SwapAxesParams{.outer = 1, .a = N, .b = OC, .inner = OH * OW});
    // dW_g = dY_g cols_g^T; dcols_g = W_g^T dY_g; dx = col2im(dcols).
    // dW's product is small (OC x C*KH*KW) and long (K = N*OH*OW): a GPU
    // would run it on a few workgroups, so K is split by samples into S
    // products of one batched launch (reading column blocks through lda and
    // ldb), whose results are summed. The same split on every backend.
    int64_t S = 1;
    if (G == 1)
      for (int64_t s = std::clamp<int64_t>(NP / 2048, 1, 32); s > 1 && S == 1; --s)
        if (N % s == 0) S = s;
    Tensor dw;
    if (S > 1) {
      const int64_t Ks = NP / S;
      dw = sum(gemm_node({gc, cols}, {S, OC, CKg},
                         GemmParams{.m = OC,
                                    .n = CKg,
                                    .k = Ks,
                                    .trans_b = true,
                                    .batch = S,
                                    .stride_a = Ks,
                                    .stride_b = Ks,
                                    .stride_c = OC * CKg,
                                    .lda = NP,
                                    .ldb = NP}),
               0)
               .reshape(ws);
    } else {
      dw = gemm_node({gc, cols}, ws,
                     GemmParams{.m = OCg,
                                .n = CKg,
                                .k = NP,
                                .trans_b = true,
                                .batch = G,
                                .stride_a = OCg * NP,
                                .stride_b = CKg * NP,
                                .stride_c = OCg * CKg});
    }
    Tensor dcols = gemm_node({wd, gc}, {C * K0 * K1, NP},
                             GemmParams{.m = CKg,
                                        .n = NP,
                                        .k = OCg,
                                        .trans_a = true,
                                        .batch = G,
                                        .stride_a = OCg * CKg,
                                        .stride_b = OCg * NP,
                                        .stride_c = CKg * NP});
    Tensor dx = node({dcols}, xs, DType::f32, same_fields<Col2imParams>(ip));
    std::vector<Tensor> r{dx, dw};
    if (has_b) r.push_back(sum(gc, 1));
    return r;
  };
  return has_b ? with_grad(y, op, {x, w, b}, bw) : with_grad(y, op, {x, w}, bw);
}

}  // namespace

namespace {
// -1: not read from SWITCHYARD_CONV yet.
std::atomic<int> g_conv_algorithm{-1};
}  // namespace

void set_conv_algorithm(ConvAlgorithm a) { g_conv_algorithm.store(int(a)); }

ConvAlgorithm conv_algorithm() {
  int a = g_conv_algorithm.load();
  if (a < 0) {
    const char* e = std::getenv("SWITCHYARD_CONV");
    const std::string v = e ? e : "";
    SY_CHECK(v.empty() || v == "auto" || v == "im2col" || v == "implicit", "conv2d",
             "expected SWITCHYARD_CONV=auto, im2col or implicit, found '", v, "'");
    a = int(v == "implicit" ? ConvAlgorithm::implicit_gemm
            : v == "im2col" ? ConvAlgorithm::im2col
                            : ConvAlgorithm::automatic);
    int expected = -1;
    g_conv_algorithm.compare_exchange_strong(expected, a);
    a = g_conv_algorithm.load();
  }
  return ConvAlgorithm(a);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Size2 stride, Size2 padding,
              Size2 dilation, int64_t groups) {
  if (auto d = autocast_cast({&x, &w, &b}))
    return conv2d(cast_to(x, *d), cast_to(w, *d), cast_to(b, *d), stride, padding, dilation,
                  groups);
  if (auto h = half_inputs({&x, &w, &b})) {
    AutocastOff off;
    return narrow(conv2d(widen(x), widen(w), widen(b), stride, padding, dilation, groups), *h);
  }
  const char* op = "conv2d";
  check_f32(op, x);
  check_f32(op, w);
  check_same_device(op, x, w);
  SY_CHECK(x.dim() == 4, op, "expected input of shape (N, C, H, W), found ", shape_str(x.shape()));
  SY_CHECK(w.dim() == 4, op,
           "expected weight of shape (out_channels, in_channels/groups, kH, kW), ", "found ",
           shape_str(w.shape()));
  SY_CHECK(groups >= 1, op, "expected groups >= 1, found ", groups);
  SY_CHECK(stride.h >= 1 && stride.w >= 1, op, "expected stride >= 1, found (", stride.h, ", ",
           stride.w, ")");
  SY_CHECK(dilation.h >= 1 && dilation.w >= 1, op, "expected dilation >= 1, found (", dilation.h,
           ", ", dilation.w, ")");
  SY_CHECK(padding.h >= 0 && padding.w >= 0, op, "expected padding >= 0, found (", padding.h, ", ",
           padding.w, ")");
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), K0 = w.size(2), K1 = w.size(3);
  SY_CHECK(C % groups == 0 && OC % groups == 0, op, "expected in_channels (", C,
           ") and out_channels (", OC, ") divisible by groups (", groups, ")");
  SY_CHECK(w.size(1) == C / groups, op, "expected weight of shape (", OC, ", ", C / groups,
           ", kH, kW)", " for input ", shape_str(x.shape()), " and groups ", groups, ", found ",
           shape_str(w.shape()));
  SY_CHECK(K0 >= 1 && K1 >= 1, op, "expected a non-empty kernel, found weight ",
           shape_str(w.shape()));
  const int64_t span0 = dilation.h * (K0 - 1) + 1, span1 = dilation.w * (K1 - 1) + 1;
  SY_CHECK(H + 2 * padding.h >= span0 && W + 2 * padding.w >= span1, op, "expected the kernel (",
           span0, "x", span1, " with dilation) to fit the padded input (", H + 2 * padding.h, "x",
           W + 2 * padding.w, "), found input ", shape_str(x.shape()));
  const int64_t OH = conv_out_size(H, K0, stride.h, padding.h, dilation.h);
  const int64_t OW = conv_out_size(W, K1, stride.w, padding.w, dilation.w);
  if (b.defined()) {
    check_f32(op, b);
    check_same_device(op, x, b);
    SY_CHECK(b.dim() == 1 && b.size(0) == OC, op, "expected bias of shape (", OC, "), found ",
             shape_str(b.shape()));
  }
  // Keep every argument a kernel binds under 64 MiB (a GPU's storage-range
  // limit can be 128 MiB), and with im2col its matrix (a temporary the
  // backward keeps): chunks of samples, each still one launch.
  constexpr int64_t kMaxArgBytes = int64_t(64) << 20;
  const ConvAlgorithm alg = conv_algorithm();
  // automatic: implicit on every backend (on the CPU it overtook im2col's
  // whole-batch GEMM once the CNN's batch norm and pooling were fused:
  // docs/benchmarks.md, "Convolution lowerings").
  const bool im2col = alg == ConvAlgorithm::im2col;
  const int64_t sample_bytes =
      std::max({C * H * W, OC * OH * OW, im2col ? C * K0 * K1 * OH * OW : 0}) *
      int64_t(sizeof(float));
  if (N > 1 && N * sample_bytes > kMaxArgBytes) {
    const int64_t chunk = std::max<int64_t>(1, kMaxArgBytes / sample_bytes);
    std::vector<Tensor> parts;
    for (int64_t b0 = 0; b0 < N; b0 += chunk)
      parts.push_back(
          conv2d(x.slice(b0, std::min(N, b0 + chunk)), w, b, stride, padding, dilation, groups));
    return cat(parts);
  }
  if (im2col) return conv2d_im2col(x, w, b, stride, padding, dilation, groups, OH, OW);
  Conv2dParams p{.batch = N,
                 .channels = C,
                 .height = H,
                 .width = W,
                 .out_channels = OC,
                 .groups = groups,
                 .kernel = {K0, K1},
                 .stride = {stride.h, stride.w},
                 .padding = {padding.h, padding.w},
                 .dilation = {dilation.h, dilation.w},
                 .has_bias = b.defined()};
  const Shape ys{N, OC, OH, OW};
  Tensor y = b.defined() ? node({x, w, b}, ys, DType::f32, p) : node({x, w}, ys, DType::f32, p);
  Tensor xd = x.detach(), wd = w.detach();
  const Shape xs = x.shape(), ws = w.shape();
  const bool has_b = b.defined();
  auto bw = [=](const Tensor& g) {
    Tensor dx = node({g, wd}, xs, DType::f32, conv_geometry<Conv2dBackwardInputParams>(p));
    auto wp = conv_geometry<Conv2dBackwardWeightParams>(p);
    wp.splits = conv_wgrad_splits(xd.device(), N * OH * OW);
    Tensor parts = node({g, xd}, {wp.splits, OC, ws[1] * K0 * K1}, DType::f32, wp);
    Tensor dw = (wp.splits > 1 ? sum(parts, 0) : parts).reshape(ws);
    std::vector<Tensor> r{dx, dw};
    if (has_b) r.push_back(sum(sum(g.reshape({N, OC, OH * OW}), 2), 0));
    return r;
  };
  return has_b ? with_grad(y, op, {x, w, b}, bw) : with_grad(y, op, {x, w}, bw);
}

// ---- pooling -------------------------------------------------------------------

namespace {

struct PoolShape {
  int64_t planes, H, W, OH, OW;
  Shape out;
  // The window fields that max and average pooling's params share.
  template <class P>
  P params(Size2 kernel, Size2 stride, Size2 padding) const {
    P p{};
    p.planes = planes, p.height = H, p.width = W, p.out_h = OH, p.out_w = OW;
    p.kernel[0] = kernel.h, p.kernel[1] = kernel.w, p.stride[0] = stride.h, p.stride[1] = stride.w;
    p.padding[0] = padding.h, p.padding[1] = padding.w;
    return p;
  }
};

PoolShape pool_shape(const char* op, const Tensor& x, Size2 kernel, Size2& stride, Size2 padding) {
  check_f32(op, x);
  SY_CHECK(x.dim() == 3 || x.dim() == 4, op, "expected input of shape (N, C, H, W) or (C, H, W), ",
           "found ", shape_str(x.shape()));
  SY_CHECK(kernel.h >= 1 && kernel.w >= 1, op, "expected kernel_size >= 1, found (", kernel.h, ", ",
           kernel.w, ")");
  if (stride.h == 0 && stride.w == 0) stride = kernel;  // PyTorch's default: the kernel size
  SY_CHECK(stride.h >= 1 && stride.w >= 1, op, "expected stride >= 1, found (", stride.h, ", ",
           stride.w, ")");
  SY_CHECK(
      padding.h >= 0 && padding.w >= 0 && 2 * padding.h <= kernel.h && 2 * padding.w <= kernel.w,
      op, "expected padding between 0 and half the kernel size (", kernel.h, "x", kernel.w,
      "), found (", padding.h, ", ", padding.w, ")");
  PoolShape s;
  s.H = x.size(-2), s.W = x.size(-1);
  SY_CHECK(s.H + 2 * padding.h >= kernel.h && s.W + 2 * padding.w >= kernel.w, op,
           "expected the window (", kernel.h, "x", kernel.w, ") to fit the padded input, found ",
           shape_str(x.shape()));
  s.planes = s.H * s.W > 0 ? x.numel() / (s.H * s.W) : 0;
  SY_CHECK(s.H * s.W < (int64_t(1) << 31), op, "expected planes of fewer than 2^31 elements ",
           "(indices are i32), found ", s.H, "x", s.W);
  s.OH = (s.H + 2 * padding.h - kernel.h) / stride.h + 1;
  s.OW = (s.W + 2 * padding.w - kernel.w) / stride.w + 1;
  s.out = x.shape();
  s.out[s.out.size() - 2] = s.OH;
  s.out[s.out.size() - 1] = s.OW;
  return s;
}

}  // namespace

// The kernel writes the maxima and their indices (i32 bits) into one buffer
// of (2, planes*OH*OW) words, since a node has one result: the first row is
// the output, the second what the backward reads.
Tensor max_pool2d(const Tensor& x, Size2 kernel, Size2 stride, Size2 padding) {
  if (x.defined() && is_half(x.dtype()))
    return max_pool2d(x.to(DType::f32), kernel, stride, padding).to(x.dtype());
  const char* op = "max_pool2d";
  PoolShape s = pool_shape(op, x, kernel, stride, padding);
  const auto p = s.params<MaxPool2dParams>(kernel, stride, padding);
  const int64_t n = s.planes * s.OH * s.OW;
  Tensor packed = node({x}, {2, n}, DType::f32, p);
  Tensor y = packed.slice(0, 1).reshape(s.out);
  Tensor idx = packed.slice(1, 2);
  const auto bp = s.params<MaxPool2dBackwardParams>(kernel, stride, padding);
  const Shape xs = x.shape();
  return with_grad(y, op, {x}, [idx, bp, xs](const Tensor& g) {
    return std::vector<Tensor>{node({g, idx}, xs, DType::f32, bp)};
  });
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel, Size2 stride, Size2 padding,
                  bool count_include_pad) {
  if (x.defined() && is_half(x.dtype()))
    return avg_pool2d(x.to(DType::f32), kernel, stride, padding, count_include_pad).to(x.dtype());
  const char* op = "avg_pool2d";
  PoolShape s = pool_shape(op, x, kernel, stride, padding);
  auto p = s.params<AvgPool2dParams>(kernel, stride, padding);
  p.count_include_pad = count_include_pad;
  Tensor y = node({x}, s.out, DType::f32, p);
  const auto bp = same_fields<AvgPool2dBackwardParams>(p);
  const Shape xs = x.shape();
  return with_grad(y, op, {x}, [bp, xs](const Tensor& g) {
    return std::vector<Tensor>{node({g}, xs, DType::f32, bp)};
  });
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output) {
  if (x.defined() && is_half(x.dtype()))
    return adaptive_avg_pool2d(x.to(DType::f32), output).to(x.dtype());
  const char* op = "adaptive_avg_pool2d";
  check_f32(op, x);
  SY_CHECK(x.dim() == 3 || x.dim() == 4, op, "expected input of shape (N, C, H, W) or (C, H, W), ",
           "found ", shape_str(x.shape()));
  const int64_t H = x.size(-2), W = x.size(-1);
  SY_CHECK(output.h >= 1 && output.w >= 1, op, "expected an output size >= 1, found (", output.h,
           ", ", output.w, ")");
  Shape out = x.shape();
  out[out.size() - 2] = output.h;
  out[out.size() - 1] = output.w;
  if (output.h == 1 && output.w == 1) {  // global average pooling: one reduction
    SY_CHECK(H * W > 0, op, "expected a non-empty plane, found ", shape_str(x.shape()));
    Shape planes(x.shape().begin(), x.shape().end() - 2);
    planes.push_back(H * W);
    return mean(x.reshape(planes), -1).reshape(out);
  }
  SY_CHECK(H % output.h == 0 && W % output.w == 0, op,
           "supports output sizes that divide the input ", "(", H, "x", W, ") or 1x1, found ",
           output.h, "x", output.w);
  const Size2 k(H / output.h, W / output.w);
  return avg_pool2d(x, k, k, 0);
}

// ---- batch norm ----------------------------------------------------------------
// Three launches forward, three backward (plus the running statistics'
// update). Forward: channel_stats (training: the batch's mean and biased
// variance), batch_norm_coef (per channel: the mean, scale = weight /
// sqrt(var + eps), the bias and 1 / sqrt(var + eps)), then y = (x - mean[c])
// * scale[c] + bias[c] (channel_affine). Backward: channel_sums of dy and
// dy * (x - mean), batch_norm_coef_backward (the weight's gradient and the
// coefficients of dx = dy * scale + (x - mean) * k[c] + k0[c], which hold the
// mean and variance terms of the batch statistics' own gradient when
// training), then channel_affine. Every pass works on x - mean, never x and
// mean apart, so a large mean cancels no digits (as PyTorch's kernels).

namespace {

// Row r of a (rows, C) tensor, as a (C) view.
Tensor row(const Tensor& t, int64_t r) { return t.slice(r, r + 1).reshape({t.size(1)}); }

}  // namespace

namespace detail {

Tensor batch_norm_fused(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                        const Tensor& weight, const Tensor& bias, bool training, float momentum,
                        float eps, Tensor* num_batches_tracked, bool relu, int64_t pool) {
  const char* op = pool > 0 ? (relu ? "batch_norm+relu+max_pool2d" : "batch_norm+max_pool2d")
                   : relu   ? "batch_norm+relu"
                            : "batch_norm";
  // 16-bit input: the result in the input's dtype whatever the affine
  // parameters' (f32 under autocast), as PyTorch's batch norm on CUDA; the
  // running statistics stay as they are (f32).
  if (half_inputs({&x, &weight, &bias})) {
    return narrow(batch_norm_fused(widen(x), running_mean, running_var, widen(weight), widen(bias),
                                   training, momentum, eps, num_batches_tracked, relu, pool),
                  is_half(x.dtype()) ? x.dtype() : DType::f32);
  }
  check_f32(op, x);
  SY_CHECK(x.dim() >= 2, op, "expected input of shape (N, C, ...), found ", shape_str(x.shape()));
  SY_CHECK(eps > 0.f, op, "expected eps > 0, found ", eps);
  SY_CHECK(momentum >= 0.f && momentum <= 1.f, op, "expected momentum in [0, 1], found ", momentum);
  const int64_t N = x.size(0), C = x.size(1), inner = N * C > 0 ? x.numel() / (N * C) : 0;
  for (const Tensor* t : {&running_mean, &running_var, &weight, &bias}) {
    if (!t->defined()) continue;
    check_f32(op, *t);
    check_same_device(op, x, *t);
    SY_CHECK(t->dim() == 1 && t->size(0) == C, op, "expected per-channel tensors of shape (", C,
             ") for input ", shape_str(x.shape()), ", found ", shape_str(t->shape()));
  }
  SY_CHECK(running_mean.defined() == running_var.defined(), op,
           "expected both running_mean and running_var, or neither; found only ",
           running_mean.defined() ? "running_mean" : "running_var");
  // Pooled (pool > 0): a max pooling of pool x pool windows, stride pool,
  // follows; the pooling reads x through the normalization (and ReLU), and
  // the backward reads the pooling's gradient, maxima and indices in place
  // of a full-size gradient and mask (kernels.h's pooled form).
  Size2 window(pool, pool), stride = window;
  const std::optional<PoolShape> ps =
      pool > 0 ? std::optional(pool_shape("max_pool2d", x, window, stride, 0)) : std::nullopt;
  SY_CHECK(pool <= 0 || x.dim() == 4, op, "expected input of shape (N, C, H, W), found ",
           shape_str(x.shape()));
  // (Checked before anything is queued: a refused input changes no state.)
  const int64_t count = N * inner;
  Tensor xd = x.detach(), mean, var;
  if (training) {
    SY_CHECK(count > 1, op, "expected more than one value per channel when training, found input ",
             shape_str(x.shape()));
    Tensor stats = node({xd}, {2, C}, DType::f32,
                        ChannelStatsParams{.outer = N, .channels = C, .inner = inner});
    mean = row(stats, 0), var = row(stats, 1);
    if (running_mean.defined() && momentum > 0.f) {
      NoGradGuard no_grad;
      // Both can be updated, or neither is: checked before queueing either.
      check_updatable(op, running_mean);
      check_updatable(op, running_var);
      Tensor rm = running_mean, rv = running_var;
      BatchNormRunningParams rp{.channels = C, .count = count, .momentum = momentum};
      if (num_batches_tracked) {  // incremented by the same launch
        check_updatable(op, *num_batches_tracked);
        rp.has_count = true;
        update_inplace({&rm, &rv, num_batches_tracked}, {stats}, rp);
        num_batches_tracked = nullptr;
      } else {
        update_inplace({&rm, &rv}, {stats}, rp);
      }
    }
  } else {
    SY_CHECK(running_mean.defined(), op,
             "expected running_mean and running_var in evaluation mode, found none");
    mean = running_mean.detach(), var = running_var.detach();
  }
  if (num_batches_tracked && training) {  // not counted with the running statistics: alone
    NoGradGuard no_grad;
    check_updatable(op, *num_batches_tracked);
    Tensor next = num_batches_tracked->to(DType::f32) + 1.f;
    update_inplace({num_batches_tracked}, {next},
                   CastParams{.n = 1, .from = DType::f32, .to = DType::i64});
  }
  ChannelAffineParams ap{.outer = N, .channels = C, .inner = inner};
  const bool has_w = weight.defined(), has_b = bias.defined();
  if (pool > 0) ap.pool = pool, ap.width = x.size(3);
  Tensor coef, y, packed;
  {
    NoGradGuard no_grad;  // coefficients only: the gradient is recorded below
    // Absent weight or bias: another argument stands in, unread.
    coef = node(
        {mean, var, has_w ? weight.detach() : mean, has_b ? bias.detach() : mean}, {4, C},
        DType::f32,
        BatchNormCoefParams{.channels = C, .has_weight = has_w, .has_bias = has_b, .eps = eps});
    const Tensor k3 = coef.slice(0, 3);
    if (ps) {
      auto mp = ps->params<MaxPool2dParams>(window, stride, 0);
      mp.channels = C, mp.affine = true, mp.relu = relu;
      packed = node({xd, k3}, {2, ps->planes * ps->OH * ps->OW}, DType::f32, mp);
      y = packed.slice(0, 1).reshape(ps->out);
    } else {
      ChannelAffineParams fp = ap;
      fp.relu = relu;
      // b is unread without has_b: the (small) coefficients stand in.
      y = node({xd, k3, k3}, x.shape(), DType::f32, fp);
    }
  }
  // With a fused ReLU, the gradient passes where the output is positive;
  // pooled, where the window's maximum is (its packed output holds both).
  const Tensor yd = ps ? packed.detach() : relu ? y.detach() : Tensor();
  const bool masked = relu || ps;  // a fifth argument
  auto bw = [=](const Tensor& g) {
    const ChannelSumsParams sp{.outer = N,
                               .channels = C,
                               .inner = inner,
                               .relu_mask = relu,
                               .pool = ap.pool,
                               .width = ap.width};
    Tensor sums = masked ? node({g, xd, mean, yd}, {2, C}, DType::f32, sp)
                         : node({g, xd, mean}, {2, C}, DType::f32, sp);
    Tensor k =
        node({coef, sums}, {6, C}, DType::f32,
             BatchNormCoefBackwardParams{.channels = C, .count = count, .training = training});
    Tensor dx;
    ChannelAffineParams q = ap;
    q.relu_mask = relu;
    const Shape& xs = xd.shape();
    if (training) {  // the batch statistics depend on x too
      q.has_b = true;
      dx = masked ? node({g, xd, k.slice(0, 5), yd}, xs, DType::f32, q)
                  : node({g, xd, k.slice(0, 5)}, xs, DType::f32, q);
    } else {
      const Tensor k3 = k.slice(0, 3);  // b unread: the coefficients stand in
      dx = masked ? node({g, k3, k3, yd}, xs, DType::f32, q) : node({g, k3, k3}, xs, DType::f32, q);
    }
    std::vector<Tensor> r{dx};
    if (has_w) r.push_back(row(k, 5));
    if (has_b) r.push_back(row(sums, 0));
    return r;
  };
  if (has_w && has_b) return with_grad(y, op, {x, weight, bias}, bw);
  if (has_w) return with_grad(y, op, {x, weight}, bw);
  if (has_b) return with_grad(y, op, {x, bias}, bw);
  return with_grad(y, op, {x}, bw);
}

}  // namespace detail

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, float momentum,
                  float eps) {
  return detail::batch_norm_fused(x, running_mean, running_var, weight, bias, training, momentum,
                                  eps, nullptr, false);
}

}  // namespace switchyard
