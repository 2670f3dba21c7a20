// SPDX-License-Identifier: MIT
// torch.distributed over MPI: the process group, collectives on tensors of
// any device (staged through host memory), and DistributedDataParallel.
// Every wait polls non-blocking MPI requests against a deadline, so a rank
// that died or hung makes the others fail with a clear error instead of
// hanging. Built without MPI, every entry point says why it is unavailable.
#include "switchyard/distributed.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "graph.h"
#include "switchyard/error.h"
#include "switchyard/profile.h"

#if SWITCHYARD_HAVE_MPI
#include <mpi.h>
#endif

namespace switchyard::distributed {
namespace {

[[maybe_unused]] double now_s() { return double(profile::now_ns()) * 1e-9; }

// Bytes to and from the host, through the runtime's own transfer paths.
using detail::copy_to_host;
[[maybe_unused]] Tensor from_host(const void* src, const Tensor& like) {
  return from_data(src, like.dtype(), like.shape(), Options(like.device()));
}

// f32 values times `scale`, read from `t` into `dst`, or written from `src`
// into a new tensor like `like`: DDP's gradients, each step. Where the host
// sees the device's memory (the CPU, zero-copy GPU memory) this is one pass
// instead of copy_to_host/from_host's copy plus a pass to scale: measured
// with bench/distributed.sh, 2 ranks ran 43.2k samples/s so, 41.1k without.
[[maybe_unused]] void read_scaled(const Tensor& t, float* dst, float scale) {
  const size_t n = size_t(t.numel());
  if (!n) return;
  const float* src = dst;
  auto lock = detail::lock_graph(t);
  detail::NodePtr m = detail::materialize(t);
  BackendDevice& from = *m->ctx->device;
  if (void* host = from.host_pointer(m->storage->buffer)) {
    from.synchronize();  // the host must see finished values
    src = reinterpret_cast<const float*>(static_cast<char*>(host) + m->offset);
  } else {
    from.download(m->storage->buffer, m->offset, dst, n * sizeof(float));
    from.synchronize();
  }
  for (size_t i = 0; i < n; ++i) dst[i] = src[i] * scale;  // in place when downloaded
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
  std::mutex mu;  // one MPI call at a time per process (MPI_THREAD_SERIALIZED)
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

// Polls until `poll` says done, at most the group's timeout: a rank that
// died or hung is an error naming the collective, not a hang. The wait
// counts as exposed communication unless the caller accounts for it
// (`own_accounting`).
template <class Poll>
void wait_until(Group& g, const char* op, Poll&& poll, bool own_accounting = false) {
  const double t0 = now_s(), deadline = t0 + g.timeout_s;
  for (int spins = 0; !poll(); ++spins) {
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

void wait_all(Group& g, std::vector<MPI_Request>& reqs, const char* op) {
  wait_until(g, op, [&] {
    int done = 0;
    check_mpi(MPI_Testall(int(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), op,
              "MPI_Testall");
    return done != 0;
  });
}

void count(Group& g, uint64_t bytes, double seconds) {
  g.stats.calls++;
  g.stats.bytes += bytes;
  g.stats.seconds += seconds;
}

// A buffer that MPI may still write (a wait that failed): kept for the
// life of the process, never freed under a pending request.
template <class V>
void park(V&& buffer) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<void>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::make_shared<std::decay_t<V>>(std::forward<V>(buffer)));
}

// Waits for `req`, whose collective uses `buffer`; when that fails, the
// buffer is parked and the group marked unusable (ranks are out of step).
template <class V>
void wait_for(Group& g, std::vector<MPI_Request>& req, const char* op, V& buffer) {
  try {
    wait_all(g, req, op);
  } catch (const std::exception& e) {
    if (g.broken.empty()) g.broken = detail::cat(op, " failed on rank ", g.rank, ": ", e.what());
    park(std::move(buffer));
    throw;
  }
}

int mpi_count(size_t n, const char* op) {
  SY_CHECK(n <= size_t(INT_MAX), op, "expected at most ", INT_MAX,
           " elements in one collective, found ", n);
  return int(n);
}

// The rings' message tags: all_reduce's, then two per DDP bucket, for at
// most kRingsInFlight buckets at once (a bucket's ring finishes before the
// one that reuses its tags starts: MPI matches messages of one tag in the
// order they were sent, and rings advance independently). MPI promises
// tags up to 32767.
constexpr int kTagAllReduce = 0, kTagBuckets = 2, kRingsInFlight = 1024;

// An all-reduce (sum or max) of n floats in place, around a ring of the
// ranks: a reduce-scatter, then an all-gather, p-1 exchanges each, with
// non-blocking point-to-point messages that progress() advances and that a
// deadline bounds. Each chunk is combined on one rank and then copied, so
// every rank ends with the same bits. On the development machine (2 ranks,
// the MLP's 0.94 MB of gradients) it takes about 160 us a step inside DDP,
// against 260-290 us for Open MPI's MPI_Iallreduce (a generic schedule) and
// 150-165 us for its blocking MPI_Allreduce, which no deadline can bound
// (bench/distributed.sh, build/bench/bench_allreduce).
struct Ring {
  float* v = nullptr;
  size_t n = 0;
  int tag = 0;
  float* tmp = nullptr;  // a chunk: n / p + 1 floats, alive until done
  bool max = false;      // else sum
  int phase = 0, step = 0;
  int recv = 0;  // the chunk the posted step receives
  MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  bool done = false;

  size_t at(const Group& g, int chunk) const { return n * size_t(chunk) / size_t(g.size); }
  void post(Group& g, const char* op) {
    const int p = g.size, r = g.rank;
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    // Reduce-scatter step s sends chunk r-s and receives chunk r-s-1 (into
    // tmp, to add); all-gather step s sends chunk r+1-s, receives chunk r-s.
    const int send = ((phase == 0 ? r - step : r + 1 - step) % p + p) % p;
    recv = ((r - step - (phase == 0 ? 1 : 0)) % p + p) % p;
    float* into = phase == 0 ? tmp : v + at(g, recv);
    check_mpi(MPI_Irecv(into, mpi_count(at(g, recv + 1) - at(g, recv), op), MPI_FLOAT, prev,
                        tag + phase, g.comm, &q[0]),
              op, "MPI_Irecv");
    check_mpi(MPI_Isend(v + at(g, send), mpi_count(at(g, send + 1) - at(g, send), op), MPI_FLOAT,
                        next, tag + phase, g.comm, &q[1]),
              op, "MPI_Isend");
  }
  void start(Group& g, const char* op) {
    if (g.size == 1) done = true;
    if (!done) post(g, op);
  }
  // Advances what has arrived; true once this rank holds the whole sum.
  bool progress(Group& g, const char* op) {
    while (!done) {
      int ready = 0;
      check_mpi(MPI_Testall(2, q, &ready, MPI_STATUSES_IGNORE), op, "MPI_Testall");
      if (!ready) return false;
      if (phase == 0) {
        float* dst = v + at(g, recv);
        const size_t e = at(g, recv + 1) - at(g, recv);
        if (max)  // a NaN wins wherever it comes from, as in PyTorch
          for (size_t i = 0; i < e; ++i)
            dst[i] = std::isnan(dst[i]) || dst[i] >= tmp[i] ? dst[i] : tmp[i];
        else
          for (size_t i = 0; i < e; ++i) dst[i] += tmp[i];
      }
      if (++step == g.size - 1) {
        step = 0;
        if (++phase == 2) {
          done = true;
          break;
        }
      }
      post(g, op);
    }
    return true;
  }
};

}  // namespace

bool is_available() { return true; }
std::string unavailable_reason() { return ""; }

void init_process_group(const std::string& backend, InitOptions o) {
  const char* op = "init_process_group";
  SY_CHECK(backend == "mpi", op, "expected backend \"mpi\", found \"", backend, "\"");
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
  Group& g = group();
  std::lock_guard<std::mutex> lock(g.mu);
  SY_CHECK(!g.initialized, op, "expected one process group, found one already initialized");
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  SY_CHECK(!finalized, op,
           "expected MPI not yet finalized, found it finalized (MPI cannot "
           "start twice in a process)");
  int provided = 0;
  if (!inited) {
    // SERIALIZED: any thread may call, one at a time (the group's lock).
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), op,
              "MPI_Init_thread");
    g.owns_mpi = true;
  } else {
    MPI_Query_thread(&provided);
  }
  SY_CHECK(provided >= MPI_THREAD_SERIALIZED, op,
           "expected MPI started with thread support SERIALIZED or better (any thread may "
           "call, one at a time), found level ",
           provided);
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &g.comm), op, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g.comm, &g.rank);
  MPI_Comm_size(g.comm, &g.size);
  MPI_Comm local;
  check_mpi(MPI_Comm_split_type(g.comm, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &local), op,
            "MPI_Comm_split_type");
  MPI_Comm_rank(local, &g.local_rank);
  MPI_Comm_free(&local);
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
  // Every rank here before MPI_Finalize (which has no deadline of its own):
  // a rank that never comes leaves MPI running rather than hanging this one.
  if (g.broken.empty()) {
    std::vector<MPI_Request> req(1);
    try {
      check_mpi(MPI_Ibarrier(g.comm, req.data()), "destroy_process_group", "MPI_Ibarrier");
      wait_all(g, req, "destroy_process_group");
    } catch (...) {  // broken now: not finalized
    }
  }
  g.initialized = false;
  if (!g.broken.empty()) return;  // pending requests may still use the communicator
  MPI_Comm_free(&g.comm);
  if (g.owns_mpi) MPI_Finalize();
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
  std::vector<float> buf(size_t(t.numel())), tmp(buf.size() / size_t(g.size) + 1);
  copy_to_host(t, buf.data());
  const double t0 = now_s();
  Ring ring{buf.data(), buf.size(), kTagAllReduce, tmp.data(), op == ReduceOp::max};
  try {
    ring.start(g, name);
    wait_until(g, name, [&] { return ring.progress(g, name); });
  } catch (const std::exception& e) {  // MPI may still write both buffers
    if (g.broken.empty()) g.broken = detail::cat(name, " failed on rank ", g.rank, ": ", e.what());
    park(std::move(buf));
    park(std::move(tmp));
    throw;
  }
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
  if (g.rank == src) copy_to_host(t, buf.data());
  const double t0 = now_s();
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Ibcast(buf.data(), mpi_count(buf.size(), name), MPI_FLOAT, src, g.comm, req.data()),
            name, "MPI_Ibcast");
  wait_for(g, req, name, buf);
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
using distributed::copy_to_host;
using distributed::from_host;
using distributed::from_host_scaled;
using distributed::read_scaled;

struct DistributedDataParallel::State {
  DistributedOptions opt;
  std::vector<Tensor> params;
  // Host buffers of the reductions: the counts and the gradients (flat),
  // and the rings' received chunks (scratch).
  std::vector<float> flat, scratch;
  int64_t global_rows = 0, last_buckets = 0;
};

DistributedDataParallel::~DistributedDataParallel() = default;
int64_t DistributedDataParallel::global_batch() const { return state_->global_rows; }
int64_t DistributedDataParallel::buckets() const { return state_->last_buckets; }

#if SWITCHYARD_HAVE_MPI

namespace {

// Rank 0's bytes of `state` on every rank, in messages of at most 1 GiB.
void broadcast_state(distributed::Group& g, std::vector<Tensor>& state, const char* op) {
  size_t total = 0;
  for (const Tensor& t : state) total += size_t(t.numel()) * dtype_size(t.dtype());
  std::vector<char> bytes(total);
  {
    std::lock_guard<std::mutex> lock(g.mu);
    size_t off = 0;
    if (g.rank == 0)
      for (const Tensor& t : state) {
        copy_to_host(t, bytes.data() + off);
        off += size_t(t.numel()) * dtype_size(t.dtype());
      }
    const double t0 = distributed::now_s();
    std::vector<MPI_Request> reqs;
    constexpr size_t kChunk = size_t(1) << 30;
    for (size_t at = 0; at < total; at += kChunk) {
      reqs.emplace_back();
      distributed::check_mpi(MPI_Ibcast(bytes.data() + at, int(std::min(kChunk, total - at)),
                                        MPI_BYTE, 0, g.comm, &reqs.back()),
                             op, "MPI_Ibcast");
    }
    distributed::wait_for(g, reqs, op, bytes);
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
}

// All-reduces the gradients of `trainable` (indices into s.params), in
// buckets of about cap bytes, last layers first, each rank's weighted by
// its rows; sets each parameter's gradient to the global batch's mean (on
// top of `old`), or leaves it as it was where no rank has one. The counts
// ride in front of the first bucket, as floats: the global batch's rows in
// 12-bit limbs (each limb's sum exact in a float for up to 4096 ranks) and,
// per trainable parameter, on how many ranks it has a gradient; one message
// fewer than a reduction of their own.
constexpr size_t kRowLimbs = 6;  // 72 bits
void reduce_gradients(DistributedDataParallel::State& s, distributed::Group& g,
                      const std::vector<size_t>& trainable, const std::vector<Tensor>& old,
                      int64_t rows, const char* op) {
  const size_t m = trainable.size(), head = kRowLimbs + m;  // 4096 ranks at most: the constructor
  size_t total = head;
  for (size_t j = 0; j < m; ++j) total += size_t(s.params[trainable[j]].numel());
  s.flat.resize(total);
  s.scratch.resize(total / size_t(g.size) + m + 2);  // a chunk per bucket
  for (size_t k = 0; k < kRowLimbs; ++k) s.flat[k] = float((uint64_t(rows) >> (12 * k)) & 4095);
  for (size_t j = 0; j < m; ++j)
    s.flat[kRowLimbs + j] = s.params[trainable[j]].grad().defined() ? 1.f : 0.f;
  std::vector<distributed::Ring> rings;
  size_t first_busy = 0;  // rings before it are done
  auto progress = [&] {
    bool all = true;
    for (size_t i = first_busy; i < rings.size(); ++i) all = rings[i].progress(g, op) && all;
    while (first_busy < rings.size() && rings[first_busy].done) ++first_busy;
    return all;
  };
  double t0 = 0;  // when the first bucket's reduction starts
  const size_t cap = std::max<size_t>(size_t(s.opt.bucket_cap_mb * 1024 * 1024), 1);
  size_t off = head, begin = 0, scratch = 0;
  for (size_t j = m; j > 0;) {  // one bucket: parameters from the last back
    size_t first = j, filled = 0;
    std::vector<Tensor> ready;
    while (first > 0 && (filled == 0 || filled < cap)) {
      --first;
      const Tensor& p = s.params[trainable[first]];
      filled += size_t(p.numel()) * sizeof(float);
      if (p.grad().defined()) ready.push_back(p.grad());
    }
    switchyard::eval(ready);
    for (size_t k = j; k-- > first;) {
      const Tensor& p = s.params[trainable[k]];
      const size_t n = size_t(p.numel());
      if (p.grad().defined())
        read_scaled(p.grad(), s.flat.data() + off, float(rows));
      else  // unused here, maybe not on another rank
        std::fill(s.flat.begin() + ptrdiff_t(off), s.flat.begin() + ptrdiff_t(off + n), 0.f);
      off += n;
    }
    if (rings.empty()) t0 = distributed::now_s();
    const size_t n = off - begin, i = rings.size();
    if (i >= size_t(distributed::kRingsInFlight))  // its tags' last user finishes first
      distributed::wait_until(
          g, op, [&] { return rings[i - distributed::kRingsInFlight].progress(g, op); }, true);
    rings.push_back({s.flat.data() + begin, n,
                     distributed::kTagBuckets + 2 * int(i % distributed::kRingsInFlight),
                     s.scratch.data() + scratch});
    scratch += n / size_t(g.size) + 1;
    rings.back().start(g, op);
    progress();  // lets the reductions already started advance
    begin = off;
    j = first;
  }
  if (rings.empty()) {  // nothing trainable: the counts alone
    t0 = distributed::now_s();
    rings.push_back({s.flat.data(), total, distributed::kTagBuckets, s.scratch.data()});
    rings.back().start(g, op);
  }
  distributed::wait_until(g, op, progress, true);
  // Every gradient is computed by the first bucket's evaluation (the lazy
  // backward evaluates all it queued at once): the reductions overlap no
  // compute, so all of their time is exposed.
  const double flight = distributed::now_s() - t0;
  distributed::count(g, total * sizeof(float), flight);
  g.stats.exposed_seconds += flight;
  int64_t global = 0;
  for (size_t k = kRowLimbs; k-- > 0;) global = (global << 12) + int64_t(s.flat[k]);
  SY_CHECK(global > 0, op, "expected rows in the global batch, found ", global);
  s.global_rows = global;
  s.last_buckets = int64_t(rings.size());

  NoGradGuard no_grad;
  const float scale = 1.f / float(global);
  off = head;
  for (size_t k = m; k-- > 0;) {
    Tensor& p = s.params[trainable[k]];
    const size_t n = size_t(p.numel());
    if (s.flat[kRowLimbs + k] > 0) {
      Tensor g_new = from_host_scaled(s.flat.data() + off, scale, p);
      if (old[trainable[k]].defined()) g_new = add(old[trainable[k]], g_new);
      p.set_grad(g_new);
      detail::queue_value(detail::node_of(g_new));  // accumulation stays bounded
    } else {
      p.set_grad(old[trainable[k]]);
    }
    off += n;
  }
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 DistributedOptions o)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  const char* op = "DistributedDataParallel";
  SY_CHECK(module_ != nullptr, op, "expected a module, found null");
  SY_CHECK(o.bucket_cap_mb > 0, op, "expected bucket_cap_mb > 0, found ", o.bucket_cap_mb);
  distributed::Group& g = distributed::ready(op);
  SY_CHECK(g.size <= 4096, op,
           "expected at most 4096 ranks (the global batch is counted in "
           "12-bit limbs), found ",
           g.size);
  register_module("module", module_);
  State& s = *state_;
  s.opt = o;
  s.params = module_->parameters();
  for (const Tensor& p : s.params)
    SY_CHECK(p.dtype() == DType::f32, op, "expected f32 parameters, found ", dtype_name(p.dtype()));
  // Every rank starts from rank 0's parameters and buffers.
  std::vector<Tensor> state = s.params;
  for (auto& [n, b] : module_->named_buffers()) state.push_back(b);
  broadcast_state(g, state, op);
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  const char* op = "DistributedDataParallel";
  SY_CHECK(x.defined() && x.dim() >= 1, op, "expected an input with a batch dimension");
  const bool x_grad = is_grad_enabled() && x.requires_grad();
  Tensor xin = x;
  if (x_grad) {  // a leaf of this rank's graph: its gradient is returned below
    xin = x.detach();
    xin.requires_grad_();
  }
  Tensor out = (*module_)(xin);
  if (!is_grad_enabled() || !out.requires_grad()) return out;
  const int64_t rows = x.size(0);
  // The backward: this rank's own graph's, then the gradients all-reduced.
  auto fn = std::make_shared<detail::GradFn>();
  fn->name = "DistributedDataParallel";
  if (x_grad) fn->inputs.push_back(x.impl_ptr());
  fn->backward = [sp = state_, out, xin, rows, x_grad, op](const Tensor& grad) mutable {
    SY_CHECK(out.defined(), "backward",
             "trying to backward through DistributedDataParallel's output a second time; its "
             "graph was freed by the first backward()");
    State& s = *sp;
    distributed::Group& g = distributed::ready(op);
    // The gradients so far, set aside (restored if anything fails): the
    // reduced ones are added to them.
    std::vector<Tensor> old(s.params.size());
    std::vector<size_t> trainable;
    for (size_t i = 0; i < s.params.size(); ++i) {
      if (!s.params[i].requires_grad()) continue;  // a frozen one keeps what it has
      old[i] = s.params[i].grad();
      s.params[i].zero_grad();
      trainable.push_back(i);
    }
    auto restore = [&] {
      for (size_t i : trainable) s.params[i].set_grad(old[i]);
    };
    try {
      out.backward(grad);
    } catch (...) {
      restore();
      throw;
    }
    out = Tensor();  // the graph is spent
    Tensor gx = x_grad ? xin.grad() : Tensor();
    xin = Tensor();
    std::lock_guard<std::mutex> lock(g.mu);
    try {
      reduce_gradients(s, g, trainable, old, rows, op);
    } catch (const std::exception& e) {
      restore();
      // Reductions may be under way: the ranks are out of step and MPI may
      // still write the buffers, which are kept.
      if (g.broken.empty())
        g.broken = detail::cat("a DistributedDataParallel backward failed on rank ", g.rank, ": ",
                               e.what());
      distributed::park(std::move(s.flat));
      distributed::park(std::move(s.scratch));
      throw;
    }
    std::vector<Tensor> result;
    if (x_grad) result.push_back(gx);
    return result;
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
