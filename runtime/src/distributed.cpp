// SPDX-License-Identifier: MIT
// torch.distributed over MPI: the process group, collectives on tensors of
// any device (staged through host memory), and DistributedDataParallel.
// Every wait polls non-blocking MPI requests against a deadline, so a rank
// that died or hung makes the others fail with a clear error instead of
// hanging. Built without MPI, every entry point says why it is unavailable.
#include "switchyard/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "graph.h"
#include "switchyard/error.h"

#if SWITCHYARD_HAVE_MPI
#include <mpi.h>
#endif

namespace switchyard::distributed {
namespace {

[[maybe_unused]] double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The bytes of a tensor of any device, into `dst`.
[[maybe_unused]] void read_host(const Tensor& t, void* dst) {
  const size_t bytes = size_t(t.numel()) * dtype_size(t.dtype());
  if (!bytes) return;
  auto lock = detail::lock_graph(t);
  detail::NodePtr m = detail::materialize(t);
  BackendDevice& from = *m->ctx->device;
  if (void* host = from.host_pointer(m->storage->buffer)) {
    from.synchronize();  // the host must see finished values
    std::memcpy(dst, static_cast<char*>(host) + m->offset, bytes);
  } else {
    from.download(m->storage->buffer, m->offset, dst, bytes);
    from.synchronize();
  }
}

[[maybe_unused]] Tensor from_host(const void* src, const Tensor& like) {
  return from_data(src, like.dtype(), like.shape(), Options(like.device()));
}

// f32 values times `scale`, read from `t` into `dst` / written from `src`
// into a new tensor like `like`: one pass over host-visible memory (the CPU,
// zero-copy GPU memory), else a transfer and a pass over the host buffer.
[[maybe_unused]] void read_scaled(const Tensor& t, float* dst, float scale) {
  const size_t n = size_t(t.numel());
  if (!n) return;
  auto lock = detail::lock_graph(t);
  detail::NodePtr m = detail::materialize(t);
  BackendDevice& from = *m->ctx->device;
  if (void* host = from.host_pointer(m->storage->buffer)) {
    from.synchronize();  // the host must see finished values
    const float* src = reinterpret_cast<const float*>(static_cast<char*>(host) + m->offset);
    for (size_t i = 0; i < n; ++i) dst[i] = src[i] * scale;
  } else {
    from.download(m->storage->buffer, m->offset, dst, n * sizeof(float));
    from.synchronize();
    for (size_t i = 0; i < n; ++i) dst[i] *= scale;
  }
}
[[maybe_unused]] Tensor from_host_scaled(float* src, float scale, const Tensor& like) {
  const size_t n = size_t(like.numel());
  detail::Context& c = detail::context_of(like.device());
  BackendDevice& d = *c.device;
  auto st = detail::new_storage(c, n * sizeof(float));
  if (void* host = d.host_pointer(st->buffer)) {
    d.wait_until_unused(st->buffer);  // a pooled buffer: queued work may still use it
    float* dst = static_cast<float*>(host);
    for (size_t i = 0; i < n; ++i) dst[i] = src[i] * scale;
  } else {
    for (size_t i = 0; i < n; ++i) src[i] *= scale;
    if (n) d.upload(st->buffer, 0, src, n * sizeof(float));
  }
  return detail::wrap(detail::make_leaf(c, std::move(st), 0, like.shape(), DType::f32));
}

}  // namespace

#if SWITCHYARD_HAVE_MPI

namespace {

struct Group {
  std::mutex mu;  // one collective at a time per process (MPI_THREAD_FUNNELED)
  bool initialized = false, owns_mpi = false;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1, local_rank = 0;
  double timeout_s = 300;
  std::string broken;  // set when a wait timed out: the group cannot be trusted
  CommStats stats;
};
Group& group() {
  static Group g;
  return g;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, size_t(len));
}

void check_mpi(int code, const char* op, const char* call) {
  if (code != MPI_SUCCESS)
    throw Error(detail::cat("[", op, "] ", call, " failed: ", mpi_error(code)));
}

Group& ready(const char* op) {
  Group& g = group();
  SY_CHECK(g.initialized, op,
           "expected init_process_group() first (launch with mpirun -np N), found no process "
           "group");
  SY_CHECK(g.broken.empty(), op, "the process group is unusable: ", g.broken);
  return g;
}

// Polls until every request is done, at most the group's timeout: a rank
// that died or hung is an error naming the collective, not a hang.
// The wait counts as exposed communication unless the caller accounts for
// it (`own_accounting`).
void wait_all(Group& g, std::vector<MPI_Request>& reqs, const char* op,
              bool own_accounting = false) {
  const double t0 = now_s(), deadline = t0 + g.timeout_s;
  for (int spins = 0;; ++spins) {
    int done = 0;
    check_mpi(MPI_Testall(int(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), op,
              "MPI_Testall");
    if (done) break;
    if (now_s() > deadline) {
      g.broken = detail::cat("rank ", g.rank, " of ", g.size, " waited ", g.timeout_s, " s in ", op,
                             " for the other ranks (a rank died or hung)");
      throw Error(detail::cat("[", op, "] expected every rank to join within ", g.timeout_s,
                              " s (SWITCHYARD_DIST_TIMEOUT_S), found rank ", g.rank, " of ", g.size,
                              " still waiting: a rank died or hung"));
    }
    if (spins < 2000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (!own_accounting) g.stats.exposed_seconds += now_s() - t0;
}

void count(Group& g, uint64_t bytes, double seconds) {
  g.stats.calls++;
  g.stats.bytes += bytes;
  g.stats.seconds += seconds;
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

}  // namespace

bool is_available() { return true; }
std::string unavailable_reason() { return ""; }

void init_process_group(const std::string& backend, InitOptions o) {
  const char* op = "init_process_group";
  SY_CHECK(backend == "mpi", op, "expected backend \"mpi\", found \"", backend, "\"");
  Group& g = group();
  std::lock_guard<std::mutex> lock(g.mu);
  SY_CHECK(!g.initialized, op, "expected one process group, found one already initialized");
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), op,
              "MPI_Init_thread");
    g.owns_mpi = true;
  }
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &g.comm), op, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g.comm, &g.rank);
  MPI_Comm_size(g.comm, &g.size);
  MPI_Comm local;
  check_mpi(MPI_Comm_split_type(g.comm, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &local), op,
            "MPI_Comm_split_type");
  MPI_Comm_rank(local, &g.local_rank);
  MPI_Comm_free(&local);
  double t = o.timeout_s;
  if (t <= 0) {
    t = 300;
    if (const char* e = std::getenv("SWITCHYARD_DIST_TIMEOUT_S"); e && *e) {
      char* end = nullptr;
      t = std::strtod(e, &end);
      SY_CHECK(end && *end == 0 && t > 0, op,
               "expected SWITCHYARD_DIST_TIMEOUT_S to be seconds > 0, found '", e, "'");
    }
  }
  g.timeout_s = t;
  g.broken.clear();
  g.stats = {};
  g.initialized = true;
}

bool is_initialized() { return group().initialized; }

void destroy_process_group() {
  Group& g = group();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!g.initialized) return;
  MPI_Comm_free(&g.comm);
  g.initialized = false;
  if (g.owns_mpi && g.broken.empty()) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

void abort_group(int code) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized && get_world_size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

int get_rank() { return group().initialized ? group().rank : 0; }
int get_world_size() { return group().initialized ? group().size : 1; }
int get_local_rank() { return group().initialized ? group().local_rank : 0; }

CommStats comm_stats() {
  Group& g = group();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.stats;
}

void all_reduce(Tensor& t, ReduceOp op) {
  const char* name = "all_reduce";
  SY_CHECK(t.defined() && t.dtype() == DType::f32, name, "expected a defined f32 tensor, found ",
           t.defined() ? dtype_name(t.dtype()) : "an undefined one");
  Group& g = ready(name);
  std::lock_guard<std::mutex> lock(g.mu);
  std::vector<float> buf(size_t(t.numel()));
  read_host(t, buf.data());
  const double t0 = now_s();
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf.data(), int(buf.size()), MPI_FLOAT, mpi_op(op), g.comm,
                           req.data()),
            name, "MPI_Iallreduce");
  wait_all(g, req, name);
  count(g, buf.size() * sizeof(float), now_s() - t0);
  if (op == ReduceOp::avg)
    for (float& v : buf) v /= float(g.size);
  t.set_data(from_host(buf.data(), t));
}

void broadcast(Tensor& t, int src) {
  const char* name = "broadcast";
  SY_CHECK(t.defined() && t.dtype() == DType::f32, name, "expected a defined f32 tensor");
  Group& g = ready(name);
  SY_CHECK(src >= 0 && src < g.size, name, "expected a source rank in [0, ", g.size, "), found ",
           src);
  std::lock_guard<std::mutex> lock(g.mu);
  std::vector<float> buf(size_t(t.numel()));
  if (g.rank == src) read_host(t, buf.data());
  const double t0 = now_s();
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Ibcast(buf.data(), int(buf.size()), MPI_FLOAT, src, g.comm, req.data()), name,
            "MPI_Ibcast");
  wait_all(g, req, name);
  count(g, buf.size() * sizeof(float), now_s() - t0);
  if (g.rank != src) t.set_data(from_host(buf.data(), t));
}

void barrier() {
  Group& g = ready("barrier");
  std::lock_guard<std::mutex> lock(g.mu);
  const double t0 = now_s();
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Ibarrier(g.comm, req.data()), "barrier", "MPI_Ibarrier");
  wait_all(g, req, "barrier");
  count(g, 0, now_s() - t0);
}

#else  // no MPI in this build

namespace {
[[noreturn]] void unavailable(const char* op) {
  throw Error(
      detail::cat("[", op, "] distributed training is not available: ", unavailable_reason()));
}
}  // namespace

bool is_available() { return false; }
std::string unavailable_reason() {
  return "this Switchyard was built without MPI (install libopenmpi-dev and openmpi-bin, "
         "e.g. with scripts/install-deps.sh, then configure again)";
}
void init_process_group(const std::string&, InitOptions) { unavailable("init_process_group"); }
bool is_initialized() { return false; }
void destroy_process_group() {}
void abort_group(int) {}
int get_rank() { return 0; }
int get_world_size() { return 1; }
int get_local_rank() { return 0; }
CommStats comm_stats() { return {}; }
void all_reduce(Tensor&, ReduceOp) { unavailable("all_reduce"); }
void broadcast(Tensor&, int) { unavailable("broadcast"); }
void barrier() { unavailable("barrier"); }

#endif

}  // namespace switchyard::distributed

// ---- DistributedDataParallel ------------------------------------------------

namespace switchyard::nn {
using distributed::from_host;
using distributed::from_host_scaled;
using distributed::read_host;
using distributed::read_scaled;

struct DistributedDataParallel::State {
  DistributedOptions opt;
  std::vector<Tensor> params;
  // Parameter indices per bucket, last layers first (their gradients are
  // computed first), each bucket with its host buffer.
  std::vector<std::vector<size_t>> buckets;
  std::vector<std::vector<float>> bufs;
  int64_t global_rows = 0;
};

DistributedDataParallel::~DistributedDataParallel() = default;
int64_t DistributedDataParallel::global_batch() const { return state_->global_rows; }
int64_t DistributedDataParallel::buckets() const { return int64_t(state_->buckets.size()); }

#if SWITCHYARD_HAVE_MPI

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 DistributedOptions o)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  const char* op = "DistributedDataParallel";
  SY_CHECK(module_ != nullptr, op, "expected a module, found null");
  SY_CHECK(o.bucket_cap_mb > 0, op, "expected bucket_cap_mb > 0, found ", o.bucket_cap_mb);
  distributed::Group& g = distributed::ready(op);
  register_module("module", module_);
  State& s = *state_;
  s.opt = o;
  s.params = module_->parameters();
  for (const Tensor& p : s.params)
    SY_CHECK(p.dtype() == DType::f32, op, "expected f32 parameters, found ", dtype_name(p.dtype()));

  // Every rank starts from rank 0's values: parameters and buffers, one
  // broadcast of their bytes.
  std::vector<Tensor> state = s.params;
  for (auto& [n, b] : module_->named_buffers()) state.push_back(b);
  size_t total = 0;
  for (const Tensor& t : state) total += size_t(t.numel()) * dtype_size(t.dtype());
  std::vector<char> bytes(total);
  {
    std::lock_guard<std::mutex> lock(g.mu);
    size_t off = 0;
    if (g.rank == 0)
      for (const Tensor& t : state) {
        read_host(t, bytes.data() + off);
        off += size_t(t.numel()) * dtype_size(t.dtype());
      }
    const double t0 = distributed::now_s();
    std::vector<MPI_Request> req(1);
    distributed::check_mpi(MPI_Ibcast(bytes.data(), int(total), MPI_BYTE, 0, g.comm, req.data()),
                           op, "MPI_Ibcast");
    distributed::wait_all(g, req, op);
    distributed::count(g, total, distributed::now_s() - t0);
  }
  if (g.rank != 0) {
    NoGradGuard no_grad;
    size_t off = 0;
    for (Tensor& t : state) {
      t.set_data(from_host(bytes.data() + off, t));
      off += size_t(t.numel()) * dtype_size(t.dtype());
    }
  }

  const size_t cap = std::max<size_t>(size_t(o.bucket_cap_mb * 1024 * 1024), 1);
  size_t filled = 0;
  for (size_t i = s.params.size(); i-- > 0;) {
    if (s.buckets.empty() || filled >= cap) {
      s.buckets.emplace_back();
      filled = 0;
    }
    s.buckets.back().push_back(i);
    filled += size_t(s.params[i].numel()) * sizeof(float);
  }
  for (auto& b : s.buckets) {
    size_t n = 0;
    for (size_t i : b) n += size_t(s.params[i].numel());
    s.bufs.emplace_back(n);
  }
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  const char* op = "DistributedDataParallel";
  SY_CHECK(x.defined() && x.dim() >= 1, op, "expected an input with a batch dimension");
  Tensor out = (*module_)(x);
  if (!is_grad_enabled() || !out.requires_grad()) return out;
  const int64_t rows = x.size(0);
  // The backward: this rank's (its own graph's, run here), then the
  // gradients all-reduced bucket by bucket, each bucket's reduction started
  // as soon as its gradients are evaluated, weighted by this rank's rows
  // and divided by the global batch's.
  auto fn = std::make_shared<detail::GradFn>();
  fn->name = "DistributedDataParallel";
  std::weak_ptr<State> weak = state_;
  fn->backward = [weak, out, rows, op](const Tensor& grad) mutable {
    auto sp = weak.lock();
    SY_CHECK(sp != nullptr, op, "backward after the DistributedDataParallel was destroyed");
    State& s = *sp;
    distributed::Group& g = distributed::ready(op);
    std::vector<Tensor> old(s.params.size());
    for (size_t i = 0; i < s.params.size(); ++i) {
      old[i] = s.params[i].grad();
      s.params[i].zero_grad();
    }
    out.backward(grad);
    out = Tensor();  // the graph is spent

    std::lock_guard<std::mutex> lock(g.mu);
    double t0 = 0;  // when the first bucket's reduction starts
    int64_t global = rows;
    std::vector<MPI_Request> reqs(1);
    distributed::check_mpi(
        MPI_Iallreduce(MPI_IN_PLACE, &global, 1, MPI_INT64_T, MPI_SUM, g.comm, reqs.data()), op,
        "MPI_Iallreduce");
    uint64_t bytes = sizeof(int64_t);
    double overlapped = 0;  // computing later buckets while earlier ones reduce
    for (size_t b = 0; b < s.buckets.size(); ++b) {
      const double tc = distributed::now_s();
      std::vector<Tensor> ready;
      for (size_t i : s.buckets[b])
        if (s.params[i].grad().defined()) ready.push_back(s.params[i].grad());
      switchyard::eval(ready);  // this bucket's gradients: one submission
      float* buf = s.bufs[b].data();
      size_t off = 0;
      for (size_t i : s.buckets[b]) {
        const size_t n = size_t(s.params[i].numel());
        Tensor gi = s.params[i].grad();
        if (gi.defined()) {
          read_scaled(gi, buf + off, float(rows));
        } else {
          std::fill(buf + off, buf + off + n, 0.f);  // unused here, maybe not on another rank
        }
        off += n;
      }
      if (b > 0) overlapped += distributed::now_s() - tc;
      reqs.emplace_back();
      if (b == 0) t0 = distributed::now_s();
      distributed::check_mpi(
          MPI_Iallreduce(MPI_IN_PLACE, buf, int(off), MPI_FLOAT, MPI_SUM, g.comm, &reqs.back()), op,
          "MPI_Iallreduce");
      bytes += off * sizeof(float);
      int done = 0;  // lets MPI progress the reductions already started
      MPI_Testall(int(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
    }
    distributed::wait_all(g, reqs, op, true);
    // In flight from the first reduction's start to the last's end; of
    // that, what was not spent computing later buckets' gradients is exposed
    // (MPI's own progress calls included).
    const double flight = distributed::now_s() - t0;
    distributed::count(g, bytes, flight);
    g.stats.exposed_seconds += std::max(0.0, flight - overlapped);
    SY_CHECK(global > 0, op, "expected rows in the global batch, found ", global);
    s.global_rows = global;

    NoGradGuard no_grad;
    const float scale = 1.f / float(global);
    for (size_t b = 0; b < s.buckets.size(); ++b) {
      float* buf = s.bufs[b].data();
      size_t off = 0;
      for (size_t i : s.buckets[b]) {
        Tensor& p = s.params[i];
        Tensor reduced = from_host_scaled(buf + off, scale, p);
        p.set_grad(old[i].defined() ? add(old[i], reduced) : reduced);
        off += size_t(p.numel());
      }
    }
    return std::vector<Tensor>{};
  };
  Tensor result = out.detach();
  result.requires_grad_();
  result.impl()->grad_fn = std::move(fn);
  return result;
}

#else

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, DistributedOptions)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  throw Error(detail::cat("[DistributedDataParallel] distributed training is not available: ",
                          distributed::unavailable_reason()));
}
Tensor DistributedDataParallel::forward(const Tensor& x) { return (*module_)(x); }

#endif

}  // namespace switchyard::nn
