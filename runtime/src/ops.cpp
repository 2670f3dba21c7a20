// SPDX-License-Identifier: MIT
// Ops: checks in the public function, a graph node, and the backward next to
// the forward (written with ops, so autograd runs on every backend).
#include "switchyard/ops.h"

#include <algorithm>
#include <string_view>

#include "graph.h"
#include "ops_internal.h"
#include "switchyard/amp.h"
#include "switchyard/error.h"

namespace switchyard {
using namespace detail;

namespace detail {

void check_defined(const char* op, const Tensor& t) {
  SY_CHECK(t.defined(), op, "expected a defined tensor, found an undefined one");
}

void check_f32(const char* op, const Tensor& t) {
  check_defined(op, t);
  SY_CHECK(t.dtype() == DType::f32, op, "expected dtype f32, found ", dtype_name(t.dtype()),
           " for a tensor of shape ", shape_str(t.shape()));
}

std::optional<DType> half_inputs(std::initializer_list<const Tensor*> ts) {
  bool any = false, dimensioned = false;
  for (const Tensor* t : ts)
    if (t->defined() && is_floating(t->dtype())) {
      any = any || is_half(t->dtype());
      dimensioned = dimensioned || t->dim() > 0;
    }
  if (!any) return std::nullopt;
  // As PyTorch: a 0-dim tensor (a scalar) does not widen dimensioned
  // tensors of its category (bf16 + a 0-dim f32 is bf16).
  bool seen = false, mixed = false;
  DType first = DType::f32;
  for (const Tensor* t : ts) {
    if (!t->defined() || !is_floating(t->dtype()) || (dimensioned && t->dim() == 0)) continue;
    if (seen && t->dtype() != first) mixed = true;
    if (!seen) first = t->dtype(), seen = true;
  }
  return mixed ? DType::f32 : first;
}

std::optional<DType> autocast_cast(std::initializer_list<const Tensor*> ts) {
  const std::optional<DType> d = autocast_dtype();
  if (!d) return std::nullopt;
  for (const Tensor* t : ts)
    if (t->defined() && is_floating(t->dtype()) && t->dtype() != *d) return d;
  return std::nullopt;
}

Tensor cast_to(const Tensor& t, DType d) {
  return t.defined() && is_floating(t.dtype()) ? t.to(d) : t;
}

DType f32_result(DType d) { return autocast_dtype() ? DType::f32 : d; }

bool native_half_gemm(std::optional<DType> h, const Tensor& a, const Tensor& b) {
  if (!h || !is_half(*h) || !a.defined() || !b.defined() || a.dtype() != *h || b.dtype() != *h)
    return false;
  const NodePtr na = node_of(a);
  return na->ctx == node_of(b)->ctx && na->ctx->device->gemm_reads(*h);
}

DType gemm_out_dtype(const Tensor& a, GemmParams p) {
  if (!is_half(p.ab_dtype)) return DType::f32;
  p.c_dtype = p.ab_dtype;
  return node_of(a)->ctx->device->gemm_writes(p) ? p.ab_dtype : DType::f32;
}

Tensor widen(const Tensor& t) { return t.defined() && is_half(t.dtype()) ? t.to(DType::f32) : t; }

Tensor narrow(const Tensor& t, DType d) {
  return t.defined() && t.dtype() == DType::f32 && d != DType::f32 ? t.to(d) : t;
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  SY_CHECK(node_of(a)->ctx == node_of(b)->ctx, op,
           "expected all tensors to be on the same device, found ", a.device().str(), " and ",
           b.device().str());
}

Tensor with_grad(Tensor out, const char* name, std::initializer_list<Tensor> inputs, Backward bw) {
  return with_grad(std::move(out), name, std::vector<Tensor>(inputs), std::move(bw));
}

Tensor with_grad(Tensor out, const char* name, const std::vector<Tensor>& inputs, Backward bw) {
  if (!is_grad_enabled()) return out;
  bool any = false;
  for (auto& t : inputs) any |= t.requires_grad();
  if (!any) return out;
  auto fn = std::make_shared<GradFn>();
  fn->name = name;
  for (auto& t : inputs) fn->inputs.push_back(t.requires_grad() ? t.impl_ptr() : nullptr);
  fn->backward = std::move(bw);
  out.impl()->requires_grad = true;
  out.impl()->grad_fn = std::move(fn);
  return out;
}

Tensor node(std::initializer_list<Tensor> in, Shape shape, DType t, const KernelParams& p) {
  std::vector<NodePtr> inputs;
  std::unique_lock<std::recursive_mutex> lock;
  if (in.size()) lock = lock_graph(*in.begin());  // no update runs between read and use
  for (auto& x : in) inputs.push_back(node_of(x));
  return wrap(make_node(std::move(inputs), std::move(shape), t, p));
}

int64_t norm_axis(const char* op, const Tensor& x, int64_t dim) {
  int64_t n = x.dim();
  int64_t a = dim < 0 ? dim + n : dim;
  SY_CHECK(a >= 0 && a < n, op, "dim ", dim, " out of range for a tensor of shape ",
           shape_str(x.shape()));
  return a;
}

}  // namespace detail

namespace {

// (rows, cols) of a tensor reduced along its last axis.
std::pair<int64_t, int64_t> rows_cols(const char* op, const Tensor& x, int64_t axis) {
  SY_CHECK(x.dim() >= 1, op, "expected at least 1 dimension, found a scalar");
  SY_CHECK(norm_axis(op, x, axis) == x.dim() - 1, op, "only the last dim is supported, found dim ",
           axis, " of shape ", shape_str(x.shape()));
  int64_t cols = x.shape().back();
  return {cols ? x.numel() / cols : 0, cols};
}

}  // namespace

// ---- matmul / linear ---------------------------------------------------------
// a (M,K) [or (K,M) when trans_a], b (K,N) [or (N,K) when trans_b] -> (M,N).

// f32 operands, or 16-bit ones the device's gemm reads (native_half_gemm):
// then the f32 sums are rounded to their dtype (by the kernel where the
// device's gemm writes it, else by a cast), and a 16-bit bias widened.
static Tensor gemm(const char* op, const Tensor& a, const Tensor& b, bool ta, bool tb,
                   const Tensor* bias, Unary act = Unary::none) {
  const DType ab = a.defined() ? a.dtype() : DType::f32;
  if (!is_half(ab) || b.dtype() != ab) {
    check_f32(op, a);
    check_f32(op, b);
  }
  check_same_device(op, a, b);
  SY_CHECK(a.dim() == 2 && b.dim() == 2, op, "expected 2-D tensors, found shapes ",
           shape_str(a.shape()), " and ", shape_str(b.shape()));
  int64_t M = ta ? a.size(1) : a.size(0), K = ta ? a.size(0) : a.size(1);
  int64_t Kb = tb ? b.size(1) : b.size(0), N = tb ? b.size(0) : b.size(1);
  SY_CHECK(K == Kb, op, "shapes ", shape_str(a.shape()), (ta ? "^T" : ""), " and ",
           shape_str(b.shape()), (tb ? "^T" : ""), " cannot be multiplied: inner dims ", K,
           " != ", Kb);
  GemmParams p{.m = M,
               .n = N,
               .k = K,
               .trans_a = ta,
               .trans_b = tb,
               .act = act,
               .batch = 1,
               .ab_dtype = ab,
               .alpha = 1.f};
  Tensor out;
  p.has_bias = bias != nullptr;
  p.c_dtype = gemm_out_dtype(a, p);
  if (bias) {
    const Tensor b32 = widen(*bias);
    check_f32(op, b32);
    check_same_device(op, a, b32);
    SY_CHECK(bias->dim() == 1 && bias->size(0) == N, op, "expected bias of shape (", N, "), found ",
             shape_str(bias->shape()));
    out = node({a, b, b32}, {M, N}, p.c_dtype, p);
  } else {
    out = node({a, b}, {M, N}, p.c_dtype, p);
  }
  return out.to(ab);  // (no-op when the kernel wrote ab)
}

// The product of matrices, plus PyTorch's other shapes that are reshapes
// around it: a vector operand (1-D), and a stack of matrices (..., M, K)
// times one matrix (K, N). Batches on both sides need a batched kernel.
static Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  const int64_t K = a.size(-1);
  const int64_t Kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  SY_CHECK(K == Kb, "matmul", "shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
           " cannot be multiplied: inner dims ", K, " != ", Kb);
  if (a.dim() >= 3 && b.dim() >= 3) {  // two stacks: one batched GEMM
    SY_CHECK(
        a.dim() == b.dim() && std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin()),
        "matmul", "expected stacks with the same leading dimensions, found shapes ",
        shape_str(a.shape()), " and ", shape_str(b.shape()),
        " (broadcasting between batch dimensions is not supported)");
    Shape out(a.shape().begin(), a.shape().end() - 1);
    out.push_back(b.size(-1));
    int64_t batch = 1;
    for (int64_t i = 0; i < a.dim() - 2; ++i) batch *= a.size(i);
    return bmm(a.reshape({batch, a.size(-2), K}), b.reshape({batch, K, b.size(-1)})).reshape(out);
  }
  SY_CHECK(b.dim() <= 2, "matmul", "expected a 1-D or 2-D second operand for a ", a.dim(),
           "-D first one, found shape ", shape_str(b.shape()));
  Shape out(a.shape().begin(), a.shape().end() - 1);  // a's leading dims, then b's columns
  if (b.dim() == 2) out.push_back(b.size(1));
  Tensor a2 = a.reshape({-1, K});
  Tensor b2 = b.dim() == 1 ? b.reshape({K, 1}) : b;
  return matmul(a2, b2).reshape(out);
}

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  check_defined("matmul", a);
  check_defined("matmul", b);
  if (auto d = autocast_cast({&a, &b})) return matmul(cast_to(a, *d), cast_to(b, *d), ta, tb);
  if (auto h = half_inputs({&a, &b}); h && !native_half_gemm(h, a, b)) {
    AutocastOff off;  // the f32 computation is not autocast again
    return narrow(matmul(widen(a), widen(b), ta, tb), *h);
  }
  if (!ta && !tb && (a.dim() != 2 || b.dim() != 2) && a.dim() >= 1 && b.dim() >= 1)
    return matmul_nd(a, b);
  Tensor out = gemm("matmul", a, b, ta, tb, nullptr);
  Tensor ad = a.detach(), bd = b.detach();
  return with_grad(out, "matmul", {a, b}, [ad, bd, ta, tb](const Tensor& g) {
    Tensor ga = ta ? matmul(bd, g, tb, true) : matmul(g, bd, false, !tb);
    Tensor gb = tb ? matmul(g, ad, true, ta) : matmul(ad, g, !ta, false);
    return std::vector<Tensor>{ga, gb};
  });
}

// x (B,in), weight (out,in), bias (out): y = x weight^T + bias.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_defined("linear", x);
  if (x.dim() != 2 && x.dim() >= 1 && w.defined() && w.dim() == 2) {  // (*, in), as nn.Linear
    Shape out(x.shape().begin(), x.shape().end() - 1);
    out.push_back(w.size(0));
    return linear(x.reshape({-1, x.size(-1)}), w, b).reshape(out);
  }
  return detail::linear_act(x, w, b, false);
}

namespace detail {

// relu: the ReLU after the layer in the GEMM's epilogue; its backward (one
// unary_backward on the output: y > 0 exactly where x > 0) ahead of the
// layer's own.
Tensor linear_act(const Tensor& x, const Tensor& w, const Tensor& b, bool relu) {
  if (auto d = autocast_cast({&x, &w, &b}))
    return linear_act(cast_to(x, *d), cast_to(w, *d), cast_to(b, *d), relu);
  if (auto h = half_inputs({&x, &w, &b}); h && !native_half_gemm(h, x, w)) {
    AutocastOff off;
    return narrow(linear_act(widen(x), widen(w), widen(b), relu), *h);
  }
  const char* op = relu ? "linear+relu" : "linear";
  if (x.dim() != 2) {
    Tensor y = linear(x, w, b);
    return relu ? switchyard::relu(y) : y;
  }
  Tensor out =
      gemm(op, x, w, false, true, b.defined() ? &b : nullptr, relu ? Unary::relu : Unary::none);
  Tensor xd = x.detach(), wd = w.detach(), yd = relu ? out.detach() : Tensor();
  bool has_b = b.defined();
  auto bw = [xd, wd, yd, has_b, relu](const Tensor& g0) {
    // (16-bit g0 and y: the mask computed in f32, the gradient rounded back;
    // y widened once for both of its arguments.)
    const Tensor y32 = relu ? widen(yd) : Tensor();
    const Tensor g = relu ? narrow(node({widen(g0), y32, y32}, g0.shape(), DType::f32,
                                        UnaryBackwardParams{.op = Unary::relu, .n = g0.numel()}),
                                   g0.dtype())
                          : g0;
    std::vector<Tensor> r{matmul(g, wd), matmul(g, xd, true, false)};
    if (has_b) r.push_back(sum(g, 0));
    return r;
  };
  return has_b ? with_grad(out, op, {x, w, b}, bw) : with_grad(out, op, {x, w}, bw);
}

}  // namespace detail

Tensor transpose(const Tensor& x) {
  check_defined("transpose", x);
  SY_CHECK(x.dim() == 2, "transpose", "expected a 2-D tensor, found shape ", shape_str(x.shape()));
  TransposeParams p{
      .rows = x.size(0), .cols = x.size(1), .elem_size = int64_t(dtype_size(x.dtype()))};
  Tensor out = node({x}, {x.size(1), x.size(0)}, x.dtype(), p);
  return with_grad(out, "transpose", {x},
                   [](const Tensor& g) { return std::vector<Tensor>{transpose(g)}; });
}

// ---- elementwise with broadcasting ------------------------------------------

// Any number of dimensions: the kernel takes 4, so adjacent dimensions that
// both operands step through alike (contiguously, or both broadcast) are
// merged first. Only shapes that alternate broadcasting more than 4 times
// cannot be merged that far.
static Tensor binary(const char* op, Binary code, const Tensor& a, const Tensor& b) {
  check_f32(op, a);
  check_f32(op, b);
  check_same_device(op, a, b);
  const size_t nd = std::max(a.shape().size(), b.shape().size());
  Shape out(nd);
  std::vector<int64_t> da(nd), db(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t x = i < nd - a.shape().size() ? 1 : a.shape()[i - (nd - a.shape().size())];
    int64_t y = i < nd - b.shape().size() ? 1 : b.shape()[i - (nd - b.shape().size())];
    SY_CHECK(x == y || x == 1 || y == 1, op, "shapes ", shape_str(a.shape()), " and ",
             shape_str(b.shape()), " cannot be broadcast: dimension ", i, " is ", x, " vs ", y);
    out[i] = x == 0 || y == 0 ? 0 : std::max(x, y);
    da[i] = x, db[i] = y;
  }
  // Element strides (0 along a broadcast dimension), innermost first, with
  // size-1 output dimensions dropped and mergeable neighbours merged.
  struct Dim {
    int64_t n, sa, sb;
  };
  std::vector<Dim> dims;
  int64_t sa = 1, sb = 1;
  for (size_t k = nd; k-- > 0;) {
    Dim d{out[k], da[k] == 1 ? 0 : sa, db[k] == 1 ? 0 : sb};
    sa *= da[k], sb *= db[k];
    if (d.n == 1) continue;
    if (!dims.empty()) {
      Dim& in = dims.back();
      auto follows = [&](int64_t outer, int64_t inner) {
        return (outer == 0 && inner == 0) || (inner != 0 && outer == inner * in.n);
      };
      if (follows(d.sa, in.sa) && follows(d.sb, in.sb)) {
        in.n *= d.n;
        continue;
      }
    }
    dims.push_back(d);
  }
  SY_CHECK(dims.size() <= 4, op, "shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
           " broadcast in ", dims.size(),
           " alternating dimensions; at most 4 are supported (expand one operand first)");
  BinaryParams p{.op = code};
  for (int i = 3, k = 0; i >= 0; --i, ++k) {
    const bool have = k < int(dims.size());
    p.dims[i] = have ? dims[size_t(k)].n : 1;
    p.a_strides[i] = have ? dims[size_t(k)].sa : 0;
    p.b_strides[i] = have ? dims[size_t(k)].sb : 0;
  }
  return node({a, b}, out, DType::f32, p);
}

Tensor add(const Tensor& a, const Tensor& b) {
  if (auto h = half_inputs({&a, &b})) return narrow(add(widen(a), widen(b)), *h);
  Tensor out = binary("add", Binary::add, a, b);
  Shape sa = a.shape(), sb = b.shape();
  return with_grad(out, "add", {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (auto h = half_inputs({&a, &b})) return narrow(sub(widen(a), widen(b)), *h);
  Tensor out = binary("sub", Binary::sub, a, b);
  Shape sa = a.shape(), sb = b.shape();
  return with_grad(out, "sub", {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(neg(g), sb)};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (auto h = half_inputs({&a, &b})) return narrow(mul(widen(a), widen(b)), *h);
  Tensor out = binary("mul", Binary::mul, a, b);
  Tensor ad = a.detach(), bd = b.detach();
  return with_grad(out, "mul", {a, b}, [ad, bd](const Tensor& g) {
    return std::vector<Tensor>{sum_to(mul(g, bd), ad.shape()), sum_to(mul(g, ad), bd.shape())};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (auto h = half_inputs({&a, &b})) return narrow(div(widen(a), widen(b)), *h);
  Tensor out = binary("div", Binary::div, a, b);
  Tensor ad = a.detach(), bd = b.detach();
  return with_grad(out, "div", {a, b}, [ad, bd](const Tensor& g) {
    Tensor gb = neg(div(mul(g, ad), mul(bd, bd)));
    return std::vector<Tensor>{sum_to(div(g, bd), ad.shape()), sum_to(gb, bd.shape())};
  });
}

// Comparisons: u8 results (1 where true), no gradient. Integer inputs are
// compared as f32 (exact below 2^24 in magnitude).
static Tensor compare(const char* op, Binary code, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
  auto f32 = [](const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); };
  NoGradGuard no_grad;
  return binary(op, code, f32(a), f32(b)).to(DType::u8);
}
static Tensor compare(const char* op, Binary code, const Tensor& a, float s) {
  check_defined(op, a);
  return compare(op, code, a, full({}, s, a.device()));
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", Binary::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", Binary::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", Binary::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", Binary::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", Binary::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", Binary::ge, a, b); }
Tensor eq(const Tensor& a, float s) { return compare("eq", Binary::eq, a, s); }
Tensor ne(const Tensor& a, float s) { return compare("ne", Binary::ne, a, s); }
Tensor lt(const Tensor& a, float s) { return compare("lt", Binary::lt, a, s); }
Tensor le(const Tensor& a, float s) { return compare("le", Binary::le, a, s); }
Tensor gt(const Tensor& a, float s) { return compare("gt", Binary::gt, a, s); }
Tensor ge(const Tensor& a, float s) { return compare("ge", Binary::ge, a, s); }

// y = scale * x + shift
static Tensor affine(const char* op, const Tensor& x, float scale, float shift) {
  if (x.defined() && is_half(x.dtype()))
    return affine(op, x.to(DType::f32), scale, shift).to(x.dtype());
  check_f32(op, x);
  AffineParams p{.n = x.numel(), .scale = scale, .shift = shift};
  Tensor out = node({x}, x.shape(), DType::f32, p);
  return with_grad(out, op, {x}, [scale](const Tensor& g) {
    return std::vector<Tensor>{scale == 1.f ? g : affine("affine", g, scale, 0.f)};
  });
}

Tensor add(const Tensor& a, float s) { return affine("add", a, 1.f, s); }
Tensor sub(const Tensor& a, float s) { return affine("sub", a, 1.f, -s); }
Tensor mul(const Tensor& a, float s) { return affine("mul", a, s, 0.f); }
Tensor div(const Tensor& a, float s) {
  SY_CHECK(s != 0.f, "div", "expected a non-zero divisor, found 0");
  return affine("div", a, 1.f / s, 0.f);
}
Tensor rsub(float s, const Tensor& a) { return affine("rsub", a, -1.f, s); }
Tensor neg(const Tensor& a) { return affine("neg", a, -1.f, 0.f); }

// ---- activations and pointwise math -----------------------------------------
// Forward: y = f(x). Backward: dx = dy * f'(x, y) in one fused kernel.

static Tensor unary(const char* op, Unary code, const Tensor& x) {
  if (x.defined() && is_half(x.dtype())) {  // exp and log are of autocast's f32 list
    const bool f32_list = code == Unary::exp || code == Unary::log;
    return unary(op, code, x.to(DType::f32)).to(f32_list ? f32_result(x.dtype()) : x.dtype());
  }
  check_f32(op, x);
  Tensor y = node({x}, x.shape(), DType::f32, UnaryParams{.op = code, .n = x.numel()});
  Tensor xd = x.detach(), yd = y.detach();
  return with_grad(y, op, {x}, [xd, yd, code](const Tensor& g) {
    UnaryBackwardParams q{.op = code, .n = g.numel()};
    return std::vector<Tensor>{node({g, xd, yd}, g.shape(), DType::f32, q)};
  });
}

Tensor relu(const Tensor& x) { return unary("relu", Unary::relu, x); }
Tensor gelu(const Tensor& x) { return unary("gelu", Unary::gelu, x); }
Tensor tanh(const Tensor& x) { return unary("tanh", Unary::tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary("sigmoid", Unary::sigmoid, x); }
Tensor exp(const Tensor& x) { return unary("exp", Unary::exp, x); }
Tensor log(const Tensor& x) { return unary("log", Unary::log, x); }
Tensor sqrt(const Tensor& x) { return unary("sqrt", Unary::sqrt, x); }
Tensor square(const Tensor& x) { return unary("square", Unary::square, x); }
Tensor abs(const Tensor& x) { return unary("abs", Unary::abs, x); }

namespace detail {
Tensor nonfinite(const Tensor& x) {
  check_f32("nonfinite", x);
  return node({x}, x.shape(), DType::f32, UnaryParams{.op = Unary::nonfinite, .n = x.numel()});
}
}  // namespace detail

// ---- reductions and broadcasts ------------------------------------------------
// x viewed as (outer, len, inner); sum over len.

static Tensor reduce(const char* op, const Tensor& x0, int64_t axis, bool keepdim, float scale) {
  check_defined(op, x0);
  if (is_half(x0.dtype())) {  // accumulated in f32, the result rounded once
    const bool f32_list = std::string_view(op) == "sum";  // autocast's (mean is not on it)
    return reduce(op, x0.to(DType::f32), axis, keepdim, scale)
        .to(f32_list ? f32_result(x0.dtype()) : x0.dtype());
  }
  // Integer and u8 tensors (counts, masks) are summed in f32, exact below 2^24.
  const Tensor x = x0.dtype() == DType::f32 ? x0 : x0.to(DType::f32);
  int64_t a = norm_axis(op, x, axis);
  Shape s = x.shape();
  int64_t outer = 1, inner = 1, len = s[a];
  for (int64_t i = 0; i < a; ++i) outer *= s[i];
  for (int64_t i = a + 1; i < int64_t(s.size()); ++i) inner *= s[i];
  Shape out = s;
  if (keepdim)
    out[a] = 1;
  else
    out.erase(out.begin() + a);
  Tensor y = node({x}, out, DType::f32,
                  ReduceSumParams{.outer = outer, .len = len, .inner = inner, .scale = scale});
  return with_grad(y, op, {x}, [=](const Tensor& g) {
    // Expand back along the reduced axis, times the scale.
    ExpandParams e{.outer = outer, .len = len, .inner = inner, .scale = scale};
    return std::vector<Tensor>{node({g}, s, DType::f32, e)};
  });
}

Tensor sum(const Tensor& x, int64_t axis, bool keepdim) {
  return reduce("sum", x, axis, keepdim, 1.f);
}

Tensor mean(const Tensor& x, int64_t axis, bool keepdim) {
  check_defined("mean", x);
  int64_t a = norm_axis("mean", x, axis);
  int64_t len = x.shape()[a];
  SY_CHECK(len > 0, "mean", "expected a non-empty axis, found shape ", shape_str(x.shape()));
  return reduce("mean", x, axis, keepdim, 1.f / float(len));
}

Tensor sum(const Tensor& x) {
  check_defined("sum", x);
  return reduce("sum", x.reshape({x.numel()}), 0, false, 1.f);
}

Tensor mean(const Tensor& x) {
  check_defined("mean", x);
  SY_CHECK(x.numel() > 0, "mean", "expected a non-empty tensor, found shape ",
           shape_str(x.shape()));
  return reduce("mean", x.reshape({x.numel()}), 0, false, 1.f / float(x.numel()));
}

Tensor expand(const Tensor& x, const Shape& shape) {
  if (x.defined() && is_half(x.dtype())) return expand(x.to(DType::f32), shape).to(x.dtype());
  check_f32("expand", x);
  check_shape("expand", shape, x.dtype());
  SY_CHECK(x.dim() <= int64_t(shape.size()), "expand", "cannot expand shape ", shape_str(x.shape()),
           " to ", shape_str(shape));
  size_t lead = shape.size() - x.shape().size();
  Shape cur(lead, 1);
  cur.insert(cur.end(), x.shape().begin(), x.shape().end());
  for (size_t i = 0; i < shape.size(); ++i)
    SY_CHECK(cur[i] == shape[i] || cur[i] == 1, "expand", "cannot expand shape ",
             shape_str(x.shape()), " to ", shape_str(shape), ": dimension ", i, " is ", cur[i],
             " vs ", shape[i]);
  Tensor t = x.reshape(cur);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (cur[i] == shape[i]) continue;
    int64_t outer = 1, inner = 1;
    for (size_t j = 0; j < i; ++j) outer *= cur[j];
    for (size_t j = i + 1; j < cur.size(); ++j) inner *= cur[j];
    ExpandParams p{.outer = outer, .len = shape[i], .inner = inner, .scale = 1.f};
    cur[i] = shape[i];
    Tensor prev = t;
    t = node({prev}, cur, DType::f32, p);
    int64_t ax = int64_t(i);
    t = with_grad(t, "expand", {prev},
                  [ax](const Tensor& g) { return std::vector<Tensor>{sum(g, ax, true)}; });
  }
  return t;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.defined() && is_half(x.dtype())) return sum_to(x.to(DType::f32), shape).to(x.dtype());
  check_f32("sum_to", x);
  if (x.shape() == shape) return x;
  SY_CHECK(int64_t(shape.size()) <= x.dim(), "sum_to", "cannot sum shape ", shape_str(x.shape()),
           " to ", shape_str(shape));
  Tensor t = x;
  size_t lead = x.shape().size() - shape.size();
  if (lead > 0) {  // collapse and sum the leading dims in one reduction
    int64_t l = 1;
    for (size_t i = 0; i < lead; ++i) l *= x.shape()[i];
    t = sum(t.reshape({l, -1}), 0).reshape(Shape(x.shape().begin() + lead, x.shape().end()));
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (t.shape()[i] == shape[i]) continue;
    SY_CHECK(shape[i] == 1, "sum_to", "cannot sum shape ", shape_str(x.shape()), " to ",
             shape_str(shape));
    t = sum(t, int64_t(i), true);
  }
  return t.reshape(shape);
}

// ---- softmax family and losses ------------------------------------------------
// x viewed as (rows, cols); normalized along cols.

static Tensor softmax_op(const char* op, bool log, const Tensor& x, int64_t axis) {
  if (x.defined() && is_half(x.dtype()))
    return softmax_op(op, log, x.to(DType::f32), axis).to(f32_result(x.dtype()));
  check_f32(op, x);
  SY_CHECK(x.dim() >= 1, op, "expected at least 1 dimension, found a scalar");
  if (const int64_t a = norm_axis(op, x, axis); a != x.dim() - 1)
    return transpose(softmax_op(op, log, transpose(x, a, -1), -1), a, -1);
  auto [r, c] = rows_cols(op, x, axis);
  int64_t rows = r, cols = c;  // captured below (clang 14 cannot capture bindings)
  Tensor y =
      node({x}, x.shape(), DType::f32, SoftmaxParams{.rows = rows, .cols = cols, .log = log});
  Tensor yd = y.detach();
  return with_grad(y, op, {x}, [=](const Tensor& g) {
    SoftmaxBackwardParams q{.rows = rows, .cols = cols, .log = log};
    return std::vector<Tensor>{node({g, yd}, g.shape(), DType::f32, q)};
  });
}

Tensor softmax(const Tensor& x, int64_t axis) { return softmax_op("softmax", false, x, axis); }
Tensor log_softmax(const Tensor& x, int64_t axis) {
  return softmax_op("log_softmax", true, x, axis);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels0) {
  if (logits.defined() && is_half(logits.dtype()))
    return cross_entropy(logits.to(DType::f32), labels0).to(f32_result(logits.dtype()));
  check_f32("cross_entropy", logits);
  check_defined("cross_entropy", labels0);
  check_same_device("cross_entropy", logits, labels0);
  SY_CHECK(logits.dim() == 2, "cross_entropy", "expected logits of shape (batch, classes), found ",
           shape_str(logits.shape()));
  SY_CHECK(labels0.dtype() == DType::i32 || labels0.dtype() == DType::i64, "cross_entropy",
           "expected labels of dtype i32 or i64, found ", dtype_name(labels0.dtype()));
  // i64 labels (PyTorch's) are read as i32; the conversion saturates, so an
  // out-of-range label is still reported as one.
  const Tensor labels = labels0.to(DType::i32);
  SY_CHECK(labels.dim() == 1 && labels.size(0) == logits.size(0), "cross_entropy",
           "expected labels of shape (", logits.size(0), "), found ", shape_str(labels.shape()));
  SY_CHECK(logits.size(0) > 0, "cross_entropy", "expected a non-empty batch, found shape ",
           shape_str(logits.shape()));
  const int64_t rows = logits.size(0), cols = logits.size(1);
  Tensor loss =
      node({logits, labels}, {}, DType::f32, CrossEntropyParams{.rows = rows, .cols = cols});
  Tensor xd = logits.detach(), ld = labels.detach();
  return with_grad(loss, "cross_entropy", {logits}, [=](const Tensor& g) {
    CrossEntropyBackwardParams q{.rows = rows, .cols = cols};
    return std::vector<Tensor>{node({xd, ld, g}, xd.shape(), DType::f32, q)};
  });
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  if (auto h = half_inputs({&input, &target}))
    return narrow(mse_loss(widen(input), widen(target)), f32_result(*h));
  check_f32("mse_loss", input);
  check_f32("mse_loss", target);
  SY_CHECK(input.shape() == target.shape(), "mse_loss",
           "expected input and target of the same "
           "shape, found ",
           shape_str(input.shape()), " and ", shape_str(target.shape()));
  return mean(square(sub(input, target)));
}

Tensor argmax(const Tensor& x, int64_t axis) {
  if (x.defined() && is_half(x.dtype())) return argmax(x.to(DType::f32), axis);
  check_f32("argmax", x);
  auto [rows, cols] = rows_cols("argmax", x, axis);
  SY_CHECK(cols > 0, "argmax", "expected a non-empty last axis, found shape ",
           shape_str(x.shape()));
  Shape out(x.shape().begin(), x.shape().end() - 1);
  return node({x}, out, DType::i32, ArgmaxParams{.rows = rows, .cols = cols});
}

// ---- the same ops as Tensor methods ---------------------------------------------

Tensor Tensor::sum() const { return switchyard::sum(*this); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return switchyard::sum(*this, dim, keepdim); }
Tensor Tensor::mean() const { return switchyard::mean(*this); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const {
  return switchyard::mean(*this, dim, keepdim);
}
Tensor Tensor::matmul(const Tensor& other) const { return switchyard::matmul(*this, other); }
Tensor Tensor::relu() const { return switchyard::relu(*this); }
Tensor Tensor::gelu() const { return switchyard::gelu(*this); }
Tensor Tensor::sigmoid() const { return switchyard::sigmoid(*this); }
Tensor Tensor::tanh() const { return switchyard::tanh(*this); }
Tensor Tensor::exp() const { return switchyard::exp(*this); }
Tensor Tensor::log() const { return switchyard::log(*this); }
Tensor Tensor::sqrt() const { return switchyard::sqrt(*this); }
Tensor Tensor::square() const { return switchyard::square(*this); }
Tensor Tensor::abs() const { return switchyard::abs(*this); }
Tensor Tensor::neg() const { return switchyard::neg(*this); }
Tensor Tensor::softmax(int64_t dim) const { return switchyard::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return switchyard::log_softmax(*this, dim); }
Tensor Tensor::argmax(int64_t dim) const { return switchyard::argmax(*this, dim); }
Tensor Tensor::eq(const Tensor& other) const { return switchyard::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return switchyard::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return switchyard::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return switchyard::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return switchyard::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return switchyard::ge(*this, other); }
Tensor Tensor::eq(float s) const { return switchyard::eq(*this, s); }
Tensor Tensor::ne(float s) const { return switchyard::ne(*this, s); }
Tensor Tensor::lt(float s) const { return switchyard::lt(*this, s); }
Tensor Tensor::le(float s) const { return switchyard::le(*this, s); }
Tensor Tensor::gt(float s) const { return switchyard::gt(*this, s); }
Tensor Tensor::ge(float s) const { return switchyard::ge(*this, s); }

// ---- dropout, layer_norm (composed) -----------------------------------------

Tensor dropout(const Tensor& x, float p, bool training) {
  if (x.defined() && is_half(x.dtype()))
    return dropout(x.to(DType::f32), p, training).to(x.dtype());
  check_f32("dropout", x);
  SY_CHECK(p >= 0.f && p <= 1.f, "dropout", "expected a probability p in [0, 1], found ", p);
  if (!training || p == 0.f) return x;
  if (p == 1.f) return x * 0.f;  // everything dropped (and no 1/0 scale)
  // One kernel each way: the mask comes from the Philox stream (rand()'s
  // draws, never stored), and the backward regenerates it.
  const RandomState r = take_random_stream();
  const DropoutParams dp{
      .n = x.numel(), .seed = r.seed, .offset = r.offset, .p = p, .scale = 1.f / (1.f - p)};
  Tensor y = node({x}, x.shape(), DType::f32, dp);
  return with_grad(y, "dropout", {x}, [dp](const Tensor& g) {
    return std::vector<Tensor>{node({g}, g.shape(), DType::f32, dp)};
  });
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  if (auto h = half_inputs({&x, &weight, &bias}))
    return narrow(layer_norm(widen(x), widen(weight), widen(bias), eps), f32_result(*h));
  check_f32("layer_norm", x);
  SY_CHECK(x.dim() >= 1, "layer_norm", "expected at least 1 dimension, found a scalar");
  SY_CHECK(eps > 0.f, "layer_norm", "expected eps > 0, found ", eps);
  const int64_t n = x.size(-1);
  for (const Tensor* t : {&weight, &bias}) {
    if (!t->defined()) continue;
    check_f32("layer_norm", *t);
    check_same_device("layer_norm", x, *t);
    SY_CHECK(t->dim() == 1 && t->size(0) == n, "layer_norm", "expected weight and bias of shape (",
             n, "), the last dimension of ", shape_str(x.shape()), ", found ",
             shape_str(t->shape()));
  }
  Tensor centered = x - mean(x, -1, true);
  Tensor var = mean(centered * centered, -1, true);
  Tensor y = centered / sqrt(var + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

}  // namespace switchyard
