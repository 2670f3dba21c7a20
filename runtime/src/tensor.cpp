// SPDX-License-Identifier: MIT
// Tensor handles, factories, views, pinned memory and reading values back
// (copies between devices: transfer.cpp).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <ostream>
#include <type_traits>

#include "graph.h"
#include "ops_internal.h"
#include "pointwise.h"
#include "switchyard/error.h"
#include "switchyard/ops.h"

namespace switchyard {
namespace detail {

Tensor wrap(NodePtr n) { return Tensor(std::make_shared<TensorImpl>(std::move(n))); }

std::shared_ptr<Storage> new_storage(Context& c, size_t bytes) {
  return std::make_shared<Storage>(c.shared_from_this(), c.pool.acquire(bytes ? bytes : 1), bytes);
}

// Destruction moves children to a per-thread list and frees them in a loop,
// so dropping a graph of any depth uses constant stack.
std::atomic<int64_t> g_pending_ops{0};
std::atomic<int64_t> g_max_pending_ops{int64_t(1) << 22};

void uncount(Node& n) {
  if (!n.counted) return;
  n.counted = false;
  g_pending_ops.fetch_sub(1, std::memory_order_relaxed);
}

// Long chains are released iteratively, not by recursion: the outermost
// destructor on a thread keeps a list that the ones it sets off append to.
// The thread_local is a plain pointer to that list (on the outermost
// destructor's stack): a thread_local with a destructor of its own can be
// torn down before the thread's last tensors are (mingw-w64's emulated TLS
// frees it first, a crash at thread exit on Windows).
Node::~Node() {
  uncount(*this);
  thread_local std::vector<NodePtr>* outer = nullptr;
  if (outer) {
    for (auto& i : inputs) outer->push_back(std::move(i));
    for (auto& d : deps) outer->push_back(std::move(d));
    return;
  }
  if (inputs.empty() && deps.empty()) return;
  std::vector<NodePtr> pending;
  pending.reserve(inputs.size() + deps.size());
  for (auto& i : inputs) pending.push_back(std::move(i));
  for (auto& d : deps) pending.push_back(std::move(d));
  outer = &pending;
  while (!pending.empty()) {
    NodePtr n = std::move(pending.back());
    pending.pop_back();
  }
  outer = nullptr;
}

TensorImpl::~TensorImpl() {
  thread_local std::vector<std::shared_ptr<GradFn>>* outer = nullptr;
  if (!grad_fn) return;
  if (outer) {
    outer->push_back(std::move(grad_fn));
    return;
  }
  std::vector<std::shared_ptr<GradFn>> pending;
  pending.push_back(std::move(grad_fn));
  outer = &pending;
  while (!pending.empty()) {
    std::shared_ptr<GradFn> f = std::move(pending.back());
    pending.pop_back();
  }
  outer = nullptr;
}

void check_fresh(const char* op, const Node& in) {
  if (in.kind != NodeKind::leaf || !in.storage || in.version >= in.storage->version) return;
  const Storage& s = *in.storage;
  if (in.version < s.discarded_through)
    throw Error(cat("[", op,
                    "] this tensor's storage had an in-place update discarded by a "
                    "failed evaluation (version ",
                    in.version, ", now ", s.version, "); its old value can no longer be read"));
  throw Error(cat("[", op,
                  "] a tensor needed here was modified in place (by an optimizer step) "
                  "after it was used: expected version ",
                  in.version, ", found ", s.version,
                  ". Evaluate values that need the old parameters (item(), to_vector(), eval(), "
                  "backward()) before optimizer.step() overwrites them; threads that train "
                  "one model must take turns for whole steps (forward, backward, step)."));
}

int64_t check_shape(const char* op, const Shape& s, DType t) {
  bool empty = false;
  for (int64_t d : s) {
    SY_CHECK(d >= 0, op, "expected non-negative dimensions, found shape ", shape_str(s));
    empty = empty || d == 0;
  }
  if (empty) return 0;
  int64_t n = 1, bytes = 0;
  for (int64_t d : s)
    SY_CHECK(!__builtin_mul_overflow(n, d, &n), op, "shape ", shape_str(s),
             " has more elements than 2^63: expected a shape whose product fits");
  SY_CHECK(!__builtin_mul_overflow(n, int64_t(dtype_size(t)), &bytes) && bytes <= kMaxTensorBytes,
           op, "shape ", shape_str(s), " of dtype ", dtype_name(t), " needs ", n, " elements of ",
           dtype_size(t), " bytes: expected at most 2^56 bytes (64 PiB) per tensor");
  return n;
}

NodePtr make_leaf(Context& c, std::shared_ptr<Storage> s, size_t offset, Shape shape, DType t) {
  check_shape("tensor", shape, t);
  GraphLock lock(c.mu);  // reads the storage's version
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::leaf;
  n->ctx = &c;
  n->dtype = t;
  n->shape = std::move(shape);
  n->version = s->version;
  n->storage = std::move(s);
  n->offset = offset;
  return n;
}

static void check_supported(const Context& c, Kernel k) {
  if (c.device->supports(k)) return;
  std::string have;
  for (int j = 0; j < kNumKernels; ++j)
    if (c.device->supports(Kernel(j)))
      have += std::string(have.empty() ? "" : ", ") + kernel_name(Kernel(j));
  throw Error(cat("[", kernel_name(k), "] expected a kernel that ", c.device->str(),
                  " implements, found it does not; it implements: ", have.empty() ? "none" : have));
}

NodePtr make_node(std::vector<NodePtr> inputs, Shape shape, DType t, const KernelParams& p,
                  Context* ctx) {
  const Kernel k = p.kernel();
  check_shape(kernel_name(k), shape, t);  // e.g. a matmul whose M x N overflows
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::op;
  n->ctx = inputs.empty() ? ctx : inputs.front()->ctx;
  if (!n->ctx) {
    n->dtype = t;
    n->shape = std::move(shape);
    n->params = p;
    return n;
  }
  check_supported(*n->ctx, k);
  GraphLock lock(n->ctx->mu);
  const int64_t waiting = g_pending_ops.load(std::memory_order_relaxed);
  SY_CHECK(waiting < g_max_pending_ops.load(std::memory_order_relaxed), kernel_name(k),
           "expected at most ", g_max_pending_ops.load(), " operations waiting to run, found ",
           waiting,
           " recorded and held but never evaluated; read a value (item(), to_vector()) "
           "or eval() the tensors that hold them, or drop the ones you no longer need");
  g_pending_ops.fetch_add(1, std::memory_order_relaxed);
  n->counted = true;
  ++n->ctx->ops_since_eval;
  n->dtype = t;
  n->shape = std::move(shape);
  n->params = p;
  n->inputs = std::move(inputs);
  for (auto& in : n->inputs) {
    check_fresh(kernel_name(k), *in);
    // Views are transparent: the reader is registered on what they alias.
    Node* b = in->base();
    if (b->kind == NodeKind::leaf && b->storage)
      b->storage->add_reader(n);
    else
      b->readers.push_back(n);
  }
  return n;
}

void Storage::add_reader(const NodePtr& n) {
  if (readers.size() >= readers_pruned_at) {
    std::erase_if(readers, [](const std::weak_ptr<Node>& w) {
      NodePtr r = w.lock();
      return !r || !r->pending();
    });
    readers_pruned_at = std::max<size_t>(16, readers.size() * 2);
  }
  readers.push_back(n);
}

NodePtr make_view(const NodePtr& base, size_t offset, Shape shape) {
  GraphLock lock(base->ctx->mu);
  if (base->kind == NodeKind::leaf && base->deps.empty()) {
    SY_CHECK(base->storage, "view", "a value was read after it was freed (internal error)");
    auto n =
        make_leaf(*base->ctx, base->storage, base->offset + offset, std::move(shape), base->dtype);
    n->version = base->version;
    return n;
  }
  auto n = std::make_shared<Node>();
  n->ctx = base->ctx;
  n->dtype = base->dtype;
  n->shape = std::move(shape);
  if (base->kind == NodeKind::view) {
    n->kind = NodeKind::view;
    n->inputs = {base->inputs[0]};
    n->offset = base->offset + offset;
  } else if (base->kind == NodeKind::leaf) {
    // A leaf waiting on an in-place update: alias its storage, keep the order.
    n->kind = NodeKind::leaf;
    n->storage = base->storage;
    n->offset = base->offset + offset;
    n->version = base->version;
    n->deps = base->deps;
  } else {
    n->kind = NodeKind::view;
    n->inputs = {base};
    n->offset = offset;
  }
  return n;
}

NodePtr node_of(const Tensor& t) {
  SY_CHECK(t.defined(), "tensor", "expected a defined tensor, found an undefined one");
  return t.impl()->node();
}

std::unique_lock<std::recursive_mutex> lock_graph(const Tensor& t) {
  for (;;) {
    Context* c = node_of(t)->ctx;
    std::unique_lock<std::recursive_mutex> lock(c->mu);
    if (node_of(t)->ctx == c) return lock;  // set_data moved it meanwhile: retry
  }
}

NodePtr materialize(const Tensor& t) {
  auto lock = lock_graph(t);
  NodePtr n = node_of(t);
  if (n->pending() || !n->deps.empty()) evaluate(*n->ctx, {n.get()});
  SY_CHECK(n->kind == NodeKind::leaf && n->storage, "tensor",
           "evaluation left a value unmaterialized (internal error)");
  return n;
}

// One version counter per storage: an update must own all of it, and
// write the newest value.
static void check_leaf_updatable(const char* op, const Node& n) {
  SY_CHECK(n.offset == 0 && n.bytes() == n.storage->bytes, op,
           "in-place updates need a tensor that owns its whole storage; found a view of ",
           n.bytes(), " bytes at offset ", n.offset, " into ", n.storage->bytes,
           " bytes (a slice of a larger tensor)");
  check_fresh(op, n);
}

void check_updatable(const char* op, const Tensor& t) {
  auto lock = lock_graph(t);
  NodePtr n = node_of(t);
  if (n->kind == NodeKind::leaf && n->storage) check_leaf_updatable(op, *n);
  // A view or an op node: update_inplace evaluates it into a leaf of its
  // own first; a view of a larger storage is caught then.
  if (n->kind == NodeKind::view) {
    const Node& b = *n->base();
    SY_CHECK(n->bytes() == b.bytes(), op,
             "in-place updates need a tensor that owns its whole storage; found a view of ",
             n->bytes(), " bytes at offset ", n->offset, " into ", b.bytes(),
             " bytes (a slice of a larger tensor)");
  }
}

void update_inplace(const std::vector<Tensor*>& targets, const std::vector<Tensor>& reads,
                    const KernelParams& p) {
  const Kernel k = p.kernel();
  SY_CHECK(!targets.empty(), kernel_name(k), "expected a tensor to update, found none");
  auto lock = lock_graph(*targets.front());
  auto u = std::make_shared<Node>();
  u->kind = NodeKind::update;
  u->params = p;
  for (Tensor* t : targets) {
    NodePtr n = node_of(*t);
    if (n->kind != NodeKind::leaf) {  // make it a leaf first (rare: fresh state)
      materialize(*t);
      n = node_of(*t);
    }
    check_leaf_updatable(kernel_name(k), *n);
    u->inputs.push_back(n);
    u->written = uint32_t(u->inputs.size());
  }
  for (const Tensor& r : reads) {
    check_fresh(kernel_name(k), *node_of(r));
    u->inputs.push_back(node_of(r));
  }
  u->ctx = u->inputs.front()->ctx;
  check_supported(*u->ctx, k);
  for (auto& in : u->inputs)
    SY_CHECK(in->ctx == u->ctx, kernel_name(k),
             "expected all tensors to be on the same device, found ", in->ctx->device->str(),
             " and ", u->ctx->device->str());
  for (Tensor* t : targets) {
    const NodePtr old = node_of(*t);
    auto post = make_leaf(*old->ctx, old->storage, old->offset, old->shape, old->dtype);
    post->version = old->version + 1;
    post->deps = {u};
    t->impl()->set_node(std::move(post));
  }
  u->ctx->pending_updates.push_back(std::move(u));
}

}  // namespace detail

using namespace detail;

Device& Options::device() const { return device_ ? *device_ : cpu(); }

const Shape& Tensor::shape() const {
  SY_CHECK(defined(), "tensor", "expected a defined tensor, found an undefined one");
  return impl_->shape;
}
DType Tensor::dtype() const {
  SY_CHECK(defined(), "tensor", "expected a defined tensor, found an undefined one");
  return impl_->dtype;
}
Device& Tensor::device() const { return *node_of(*this)->ctx->device; }

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  int64_t i = d < 0 ? d + n : d;
  SY_CHECK(i >= 0 && i < n, "size", "dimension ", d, " out of range for a ", n,
           "-d tensor of shape ", shape_str(shape()));
  return shape()[i];
}

// ---- factories -------------------------------------------------------------

namespace {

thread_local bool g_grad_enabled = true;
std::atomic<uint64_t> g_seed{0x5eed};
std::atomic<uint64_t> g_offset{0};

Tensor finish_factory(NodePtr n, const Options& o) {
  Tensor t = wrap(std::move(n));
  if (o.requires_grad()) t.requires_grad_();
  return t;
}

// A tensor made by a kernel with no inputs (fill, arange, the RNGs); `make`
// gives its params from the element count.
template <class Make>
Tensor generator(const Shape& s, const Options& o, const char* op, Make make) {
  check_shape(op, s, o.dtype());
  Context& c = context_of(o.device());
  return finish_factory(make_node({}, s, o.dtype(), make(numel(s)), &c), o);
}

template <class P>
Tensor random(const Shape& s, float a, float b, const Options& o, const char* op) {
  if (is_half(o.dtype())) {  // drawn in f32 and rounded: the f32 draw's values, to nearest even
    Options f = o;
    f.dtype(DType::f32).requires_grad(false);
    Tensor t = random<P>(s, a, b, f, op).to(o.dtype());
    if (o.requires_grad()) t.requires_grad_();
    return t;
  }
  SY_CHECK(o.dtype() == DType::f32, op, "expected dtype f32, bf16 or f16, found ",
           dtype_name(o.dtype()));
  // Each tensor draws from its own Philox stream.
  uint64_t seed = g_seed.load(), offset = g_offset.fetch_add(1);
  return generator(s, o, op, [&](int64_t n) {
    P p{.n = n, .seed = seed, .offset = offset};
    if constexpr (std::is_same_v<P, RandUniformParams>)
      p.low = a, p.high = b;
    else
      p.mean = a, p.std = b;
    return p;
  });
}

}  // namespace

void manual_seed(uint64_t seed) {
  g_seed = seed;
  g_offset = 0;
}

RandomState random_state() { return {g_seed.load(), g_offset.load()}; }

namespace detail {
RandomState take_random_stream() { return {g_seed.load(), g_offset.fetch_add(1)}; }
}  // namespace detail

void set_random_state(const RandomState& s) {
  g_seed = s.seed;
  g_offset = s.offset;
}

Tensor full(Shape s, float value, Options o) {
  return generator(s, o, "full", [&](int64_t n) {
    return FillParams{.n = n, .dtype = o.dtype(), .value = value};
  });
}
Tensor zeros(Shape s, Options o) { return full(std::move(s), 0.f, o); }
Tensor ones(Shape s, Options o) { return full(std::move(s), 1.f, o); }
Tensor zeros_like(const Tensor& t) {
  return zeros(t.shape(), Options(t.device()).dtype(t.dtype()));
}
Tensor ones_like(const Tensor& t) { return ones(t.shape(), Options(t.device()).dtype(t.dtype())); }
Tensor arange(int64_t n, Options o) {
  return generator({n}, o, "arange", [&](int64_t count) {
    return ArangeParams{.n = count, .dtype = o.dtype(), .start = 0.f, .step = 1.f};
  });
}
Tensor rand(Shape s, Options o) { return random<RandUniformParams>(s, 0.f, 1.f, o, "rand"); }
Tensor uniform(Shape s, float lo, float hi, Options o) {
  return random<RandUniformParams>(s, lo, hi, o, "uniform");
}
Tensor randn(Shape s, Options o) { return random<RandNormalParams>(s, 0.f, 1.f, o, "randn"); }

Tensor randint(int64_t low, int64_t high, Shape s, Options o) {
  constexpr int64_t kExact = int64_t(1) << 24;  // integers a float holds exactly
  SY_CHECK(high > low && high - low <= kExact && low >= -kExact && high <= kExact, "randint",
           "expected low < high, high - low <= 2^24 and |low|, |high| <= 2^24, found low=", low,
           " high=", high);
  const DType t = o.has_dtype() ? o.dtype() : DType::i32;
  SY_CHECK(t != DType::u8 || (low >= 0 && high <= 256), "randint",
           "expected a range within [0, 256) for dtype u8, found [", low, ", ", high, ")");
  Options f = o;
  f.dtype(DType::f32).requires_grad(false);
  NoGradGuard no_grad;
  // uniform [0, span) truncated is a floor; shifting whole floats is exact.
  Tensor u = uniform(std::move(s), 0.f, float(high - low), f);
  return add(u.to(DType::i32).to(DType::f32), float(low)).to(t);
}

Tensor from_data(const void* data, DType t, Shape s, Options o) {
  const int64_t n = check_shape("from_data", s, t);
  Context& c = context_of(o.device());
  BackendDevice& d = *c.device;
  const size_t bytes = size_t(n) * dtype_size(t);
  auto st = new_storage(c, bytes);
  if (bytes) d.upload(st->buffer, 0, data, bytes);
  return finish_factory(make_leaf(c, std::move(st), 0, std::move(s), t), o);
}

template <class T>
static Tensor from_vec(const std::vector<T>& v, Shape s, Options o, DType t) {
  SY_CHECK(int64_t(v.size()) == check_shape("from_vector", s, t), "from_vector", "expected ",
           numel(s), " values for shape ", shape_str(s), ", found ", v.size());
  return from_data(v.data(), t, std::move(s), o.dtype(t));
}
// Floats make an f32 tensor, or a bf16/f16 one when the options say so
// (rounded to nearest even here, before the upload).
Tensor from_vector(const std::vector<float>& v, Shape s, Options o) {
  if (o.has_dtype() && is_half(o.dtype())) {
    const DType t = o.dtype();
    SY_CHECK(int64_t(v.size()) == check_shape("from_vector", s, t), "from_vector", "expected ",
             numel(s), " values for shape ", shape_str(s), ", found ", v.size());
    std::vector<uint16_t> h(v.size());
    for (size_t k = 0; k < v.size(); ++k)
      h[k] = t == DType::bf16 ? pointwise::float_to_bf16(v[k]) : pointwise::float_to_f16(v[k]);
    return from_data(h.data(), t, std::move(s), o);
  }
  return from_vec(v, std::move(s), o, DType::f32);
}
Tensor from_vector(const std::vector<int32_t>& v, Shape s, Options o) {
  return from_vec(v, std::move(s), o, DType::i32);
}
Tensor from_vector(const std::vector<uint8_t>& v, Shape s, Options o) {
  return from_vec(v, std::move(s), o, DType::u8);
}
Tensor from_vector(const std::vector<int64_t>& v, Shape s, Options o) {
  return from_vec(v, std::move(s), o, DType::i64);
}

// ---- evaluation and transfers ----------------------------------------------

void eval(const std::vector<Tensor>& ts) {
  std::vector<NodePtr> held;  // another thread may replace a tensor's node meanwhile
  std::vector<std::pair<Context*, std::vector<Node*>>> groups;
  for (const Tensor& t : ts) {
    held.push_back(node_of(t));
    Node* n = held.back().get();
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == n->ctx; });
    if (it == groups.end())
      groups.push_back({n->ctx, {n}});
    else
      it->second.push_back(n);
  }
  for (auto& [c, roots] : groups) evaluate(*c, roots);
}

void synchronize(Device& d) {
  Context& c = context_of(d);
  {
    GraphLock lock(c.mu);
    if (!c.pending_updates.empty()) evaluate(c, {});
  }
  c.device->synchronize();
}

Tensor Tensor::to(std::string_view name, bool non_blocking) const {
  return to(switchyard::device(name), non_blocking);
}

Tensor Tensor::pin_memory() const { return pin_with(nullptr); }
Tensor Tensor::pin_memory(Device& device) const { return pin_with(&device); }

Tensor Tensor::pin_with(Device* only) const {
  const NodePtr src = node_of(*this);
  SY_CHECK(src->ctx->device.get() == &cpu(), "pin_memory", "expected a cpu tensor, found one on ",
           src->ctx->device->str());
  auto source_lock = lock_graph(*this);  // held through the copy, as in to()
  NodePtr mp = materialize(*this);
  Node& m = *mp;
  if (m.storage->pin_ctx) return *this;
  size_t bytes = m.bytes();
  for (Device* dev : devices()) {
    if (dev->info().backend == "cpu" || dev->info().backend == "mock" || (only && dev != only))
      continue;
    Context& owner = context_of(*dev);
    BackendDevice* d = owner.device.get();
    Buffer b = owner.host_pool.acquire(bytes ? bytes : 1);  // cached, as PyTorch's host allocator
    if (!b) continue;
    void* host = d->host_pointer(b);
    if (!host) {
      d->release(b);
      continue;
    }
    try {
      d->wait_until_unused(b);  // a reused buffer may still feed a queued copy
    } catch (...) {             // a lost device: the buffer goes back
      d->release(b);
      throw;
    }
    if (bytes) std::memcpy(host, static_cast<char*>(m.storage->buffer.handle) + m.offset, bytes);
    Context& c = context_of(cpu());
    auto st = std::make_shared<Storage>(c.shared_from_this(), Buffer{host, b.bytes}, bytes);
    st->pin_ctx = owner.shared_from_this();
    st->pin_buffer = b;
    return wrap(make_leaf(c, std::move(st), 0, m.shape, m.dtype));
  }
  return *this;
}

bool Tensor::is_pinned() const {
  const NodePtr n = node_of(*this);
  return n->kind == NodeKind::leaf && n->storage && n->storage->pin_ctx;
}

// A cast between floating dtypes passes gradients back (cast to the
// input's dtype); casts to or from integers end the graph.
Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  const DType from = dtype();
  CastParams p{.n = numel(), .from = from, .to = t};
  Tensor out;
  {
    auto lock = lock_graph(*this);
    out = wrap(make_node({node_of(*this)}, shape(), t, p));
  }
  if (!is_floating(from) || !is_floating(t)) return out;
  return with_grad(out, "to", {*this},
                   [from](const Tensor& g) { return std::vector<Tensor>{g.to(from)}; });
}

namespace detail {
void copy_to_host(const Tensor& t, void* dst) {
  BackendDevice* d = nullptr;
  {
    // The download is queued under the graph lock, so another thread's
    // in-place update of this storage (a shared parameter's step) runs
    // before it or after it, never during. The wait needs no lock.
    auto lock = lock_graph(t);
    NodePtr m = materialize(t);
    const size_t bytes = m->bytes();
    if (!bytes) return;
    d = m->ctx->device.get();
    d->download(m->storage->buffer, m->offset, dst, bytes);
  }
  d->synchronize();
}

Tensor copy_to(const Tensor& t, Device& d) {
  NoGradGuard no_grad;
  if (&t.device() != &d) return t.detach().to(d);
  std::vector<unsigned char> host(size_t(t.numel()) * dtype_size(t.dtype()));
  copy_to_host(t, host.data());
  return from_data(host.data(), t.dtype(), t.shape(), Options().device(d));
}
}  // namespace detail

template <class T>
std::vector<T> Tensor::to_vector() const {
  constexpr DType want = std::is_same_v<T, float>      ? DType::f32
                         : std::is_same_v<T, int32_t>  ? DType::i32
                         : std::is_same_v<T, int64_t>  ? DType::i64
                         : std::is_same_v<T, uint16_t> ? DType::bf16
                                                       : DType::u8;
  std::vector<T> out(static_cast<size_t>(numel()));
  if constexpr (std::is_same_v<T, float>) {
    if (is_half(dtype())) {  // widened here, exactly, after the download
      std::vector<uint16_t> h(out.size());
      copy_to_host(*this, h.data());
      for (size_t k = 0; k < h.size(); ++k)
        out[k] =
            dtype() == DType::bf16 ? pointwise::bf16_to_float(h[k]) : pointwise::f16_to_float(h[k]);
      return out;
    }
  }
  SY_CHECK(dtype() == want || (std::is_same_v<T, uint16_t> && dtype() == DType::f16), "to_vector",
           "expected a tensor of dtype ", dtype_name(want),
           std::is_same_v<T, float>      ? " (or bf16, f16)"
           : std::is_same_v<T, uint16_t> ? " or f16"
                                         : "",
           " for this element type, found dtype ", dtype_name(dtype()));
  copy_to_host(*this, out.data());
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<uint16_t> Tensor::to_vector<uint16_t>() const;

float Tensor::item() const {
  SY_CHECK(numel() == 1, "item", "expected a tensor with one element, found shape ",
           shape_str(shape()));
  switch (dtype()) {
    case DType::f32:
      return to_vector<float>()[0];
    case DType::i32:
      return float(to_vector<int32_t>()[0]);
    case DType::u8:
      return float(to_vector<uint8_t>()[0]);
    case DType::i64:
      return float(to_vector<int64_t>()[0]);
    case DType::bf16:
    case DType::f16:
      return to_vector<float>()[0];
  }
  return 0.f;
}

// ---- views -----------------------------------------------------------------

Tensor Tensor::reshape(Shape s) const {
  int64_t known = 1, infer = -1;
  const bool has_zero = std::find(s.begin(), s.end(), 0) != s.end();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      SY_CHECK(infer < 0, "reshape", "only one dimension can be -1, found shape ", shape_str(s));
      infer = int64_t(i);
    } else {
      SY_CHECK(s[i] >= 0, "reshape", "invalid dimension ", s[i], " in ", shape_str(s));
      SY_CHECK(has_zero || !__builtin_mul_overflow(known, s[i], &known), "reshape", "shape ",
               shape_str(s), " has more elements than 2^63");
    }
  }
  if (infer >= 0) {
    SY_CHECK(!has_zero && known > 0 && numel() % known == 0, "reshape", "cannot reshape ",
             shape_str(shape()), " into ", shape_str(s),
             has_zero ? " (-1 is ambiguous next to a 0-size dimension)" : "");
    s[infer] = numel() / known;
  }
  check_shape("reshape", s, dtype());
  SY_CHECK(switchyard::numel(s) == numel(), "reshape", "cannot reshape ", shape_str(shape()), " (",
           numel(), " elements) into ", shape_str(s), " (", switchyard::numel(s), " elements)");
  Shape from = shape();
  Tensor out = [&] {
    auto lock = lock_graph(*this);
    return wrap(make_view(node_of(*this), 0, s));
  }();
  if (requires_grad() && is_grad_enabled()) {
    auto fn = std::make_shared<GradFn>();
    fn->name = "reshape";
    fn->inputs = {impl_ptr()};
    fn->backward = [from](const Tensor& g) { return std::vector<Tensor>{g.reshape(from)}; };
    out.impl()->requires_grad = true;
    out.impl()->grad_fn = std::move(fn);
  }
  return out;
}

Tensor Tensor::flatten(int64_t start_dim) const {
  const int64_t k = std::min<int64_t>(start_dim, dim());
  Shape s(shape().begin(), shape().begin() + k);
  s.push_back(switchyard::numel(Shape(shape().begin() + k, shape().end())));  // (0, 5) -> (0, 5)
  return reshape(s);
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  SY_CHECK(dim() >= 1, "slice", "expected a tensor with at least 1 dimension, found a scalar");
  int64_t rows = shape()[0];
  SY_CHECK(0 <= begin && begin <= end && end <= rows, "slice",
           "expected 0 <= begin <= end <= ", rows, ", found [", begin, ", ", end, ")");
  Shape s = shape();
  s[0] = end - begin;
  size_t row_bytes = size_t(numel() / std::max<int64_t>(rows, 1)) * dtype_size(dtype());
  Tensor out = [&] {
    auto lock = lock_graph(*this);
    return wrap(make_view(node_of(*this), size_t(begin) * row_bytes, s));
  }();
  if (requires_grad() && is_grad_enabled()) {
    // The gradient of a row slice: zeros with the slice's rows filled in.
    auto fn = std::make_shared<GradFn>();
    fn->name = "slice";
    fn->inputs = {impl_ptr()};
    Shape full_shape = shape();
    fn->backward = [full_shape, begin](const Tensor& g) {
      int64_t row = full_shape[0] ? switchyard::numel(full_shape) / full_shape[0] : 0;
      PadParams p{.begin = begin * row,
                  .len = switchyard::numel(g.shape()),
                  .total = switchyard::numel(full_shape)};
      auto lock = lock_graph(g);
      return std::vector<Tensor>{wrap(make_node({node_of(g)}, full_shape, DType::f32, p))};
    };
    out.impl()->requires_grad = true;
    out.impl()->grad_fn = std::move(fn);
  }
  return out;
}

Tensor Tensor::t() const { return transpose(*this); }

Tensor Tensor::detach() const { return wrap(node_of(*this)); }

void Tensor::set_data(const Tensor& value) {
  SY_CHECK(defined() && value.defined(), "set_data", "expected defined tensors");
  SY_CHECK(value.shape() == shape() && value.dtype() == dtype(), "set_data",
           "expected a value of shape ", shape_str(shape()), " and dtype ", dtype_name(dtype()),
           ", found shape ", shape_str(value.shape()), " and dtype ", dtype_name(value.dtype()));
  impl_->set_node(node_of(value));
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(shape=" << shape_str(t.shape()) << ", dtype=" << dtype_name(t.dtype())
     << ", device=" << t.device().str();
  // Values, flattened; beyond 1000 elements the first and last three, as
  // PyTorch summarizes (only those are read back).
  NoGradGuard no_grad;
  const int64_t n = t.numel();
  // Integers are read as i64 (exact), floats as f32 (bf16 and f16 widen exactly).
  const bool ints = !is_floating(t.dtype());
  Tensor flat = t.reshape({n});
  if (ints) flat = flat.to(DType::i64);
  auto put = [&](int64_t b, int64_t e, bool lead) {
    auto write = [&](const auto& v) {
      for (size_t i = 0; i < v.size(); ++i) os << (lead || i ? ", " : "") << v[i];
    };
    if (ints)
      write(flat.slice(b, e).to_vector<int64_t>());
    else
      write(flat.slice(b, e).to_vector<float>());
  };
  os << ", values=[";
  if (n <= 1000) {
    put(0, n, false);
  } else {
    put(0, 3, false);
    os << ", ...";
    put(n - 3, n, true);
  }
  os << "]";
  if (t.requires_grad()) os << ", requires_grad";
  return os << ")";
}

// ---- autograd mode -----------------------------------------------------------

bool is_grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

}  // namespace switchyard
