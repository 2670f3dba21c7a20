// SPDX-License-Identifier: MIT
// The CUDA device (see cuda_device.h), written against the device contract in
// device.h:
// - One non-blocking stream per device carries every copy and launch in
//   order, so a buffer released while queued work still uses it can be
//   handed out again at once (only later work can touch it).
// - upload() copies the source into a slice of a 32 MiB pinned staging ring
//   and enqueues the DMA, so it returns with the source consumed and does
//   not wait for the stream (unless the ring is full of work still in
//   flight, or over 1,024 staged transfers are).
//   download() into pageable memory lands in the ring and is copied out at
//   the next synchronize(); into pinned memory it goes straight there.
//   Transfers over 8 MiB move in 8 MiB slices, so memcpy and DMA overlap.
// - A Program runs eagerly the first time its kernels are seen; when they
//   come again, the run is captured into a CUDA graph and from then on each
//   run with the same argument addresses and params is one cudaGraphLaunch
//   (up to 4 graphs per Program, least recently used go). A capture or
//   instantiation that fails runs eagerly; after 3 failures the Program
//   stays eager.
//   Once a Program has its 4 graphs, a run with new addresses or params but
//   the same kernels (a changed scalar param, more binding sets than
//   graphs) is captured and applied to the least recently used of them by
//   cudaGraphExecUpdate; only when the update is refused (the captured
//   topology differs) is a new graph instantiated in its place.
//   Dropout's and the random fills' Philox offsets, new at every call, and
//   the optimizers' learning rates (kLearningRate), which a scheduler
//   changes, are not baked in: the graph reads them from device memory that
//   a staged copy rewrites before each run, so a step with dropout and a
//   schedule replays as is.
// - Kernels report bad input in device status words; synchronize() reads them
//   back and throws.
#include "cuda_device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_check.h"
#include "cuda_dispatch.h"
#include "cuda_graph_key.h"
#include "switchyard/backend/custom.h"
#include "switchyard/profile.h"
#include "switchyard/settings.h"
#include "units.h"

namespace switchyard::cuda_impl {
namespace {

constexpr size_t kChunk = size_t(8) << 20;
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr size_t kScratchBytes = size_t(8) << 20;  // split reductions' partial sums
constexpr size_t kMaxPrograms = 64;                // Programs whose graphs are kept
constexpr size_t kMaxSegments = 1024;  // staged transfers in flight before the oldest are retired

}  // namespace

CudaDevice::CudaDevice(DeviceInfo info, int ordinal, int64_t max_blocks)
    : BackendDevice(std::move(info)),
      ordinal_(ordinal),
      alloc_(
          [this](size_t n) -> void* {
            void* p = nullptr;
            cudaError_t e = cudaMalloc(&p, n);
            if (e == cudaErrorMemoryAllocation) {
              (void)cudaGetLastError();  // not sticky: clear it
              return nullptr;
            }
            if (e != cudaSuccess) throw_cuda(e, "allocate", "cudaMalloc");
            ++counters_.memory_allocations;
            return p;
          },
          [this](void* p) {
            // Blocks in this segment may have fed work still queued.
            if (stream_) (void)cudaStreamSynchronize(stream_);
            (void)cudaFree(p);
          }) {
  env_.max_blocks = std::max<int64_t>(max_blocks, 1);
  for (const auto& [k, v] : this->info().properties)
    if (k == "compute_capability") std::sscanf(v.c_str(), "%d.%d", &cc_major_, &cc_minor_);
  gemm_ = [this](const GemmParams& p, float* C, const void* A, const void* B, const float* bias,
                 const LaunchEnv& env) { blas_.gemm(p, C, A, B, bias, env); };
  env_.gemm = &gemm_;  // the device lives at one address: set once
  custom_ = [this](const CustomParams& p, void* const* a, const LaunchEnv& env) {
    auto it = custom_fns_.find(p.id);  // under mu_ (execute_impl)
    SY_CHECK(it != custom_fns_.end() && g_custom_cuda, "custom", "expected kernel ", p.id,
             " loaded on ", str(), " before its launch, found it was not (internal error)");
    const KernelSpec& s = custom_impl::spec(p.id);
    g_custom_cuda->launch(it->second, s, p, a, int(p.outputs + int64_t(s.inputs.size())),
                          env.stream);
  };
  env_.custom = &custom_;
  conv_ = [this](const Instr& ins, void* const* a, const LaunchEnv& env) {
    return dnn_.run(ins, a, env);
  };
  graphs_enabled_ = graphs_enabled();
}

bool graphs_enabled() {
  const char* g = std::getenv("SWITCHYARD_CUDA_GRAPHS");
  return !(g && std::string(g) == "0");
}

CudaDevice::~CudaDevice() { shutdown(); }

void CudaDevice::set_device() const { SY_CUDA("cuda", cudaSetDevice(ordinal_)); }

void CudaDevice::ensure() {
  SY_CHECK(!down_, "cuda", str(), " was shut down (the process is exiting)");
  set_device();
  if (ready_) return;
  try {
    SY_CUDA("cuda", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SY_CUDA("cuda", cudaMalloc(reinterpret_cast<void**>(&status_dev_), sizeof(DeviceStatus)));
    SY_CUDA("cuda", cudaMemsetAsync(status_dev_, 0, sizeof(DeviceStatus), stream_));
    SY_CUDA("cuda", cudaHostAlloc(reinterpret_cast<void**>(&status_host_), sizeof(DeviceStatus),
                                  cudaHostAllocDefault));
    SY_CUDA("cuda", cudaMalloc(&scratch_, kScratchBytes));
  } catch (...) {  // leave nothing half-made: the next call tries again
    if (status_host_) (void)cudaFreeHost(status_host_);
    if (status_dev_) (void)cudaFree(status_dev_);
    if (stream_) (void)cudaStreamDestroy(stream_);
    status_host_ = nullptr;
    status_dev_ = nullptr;
    stream_ = nullptr;
    throw;
  }
  counters_.memory_allocations += 3;
  env_.stream = stream_;
  env_.status = status_dev_;
  env_.scratch = scratch_;
  env_.scratch_bytes = kScratchBytes;
  ready_ = true;
}

void CudaDevice::shutdown() noexcept {
  std::lock_guard lock(mu_);
  if (down_) return;
  down_ = true;
  if (!ready_) return;
  // Errors are ignored from here on: the process is going away.
  (void)cudaSetDevice(ordinal_);
  (void)cudaStreamSynchronize(stream_);
  for (auto& [id, pg] : programs_) {
    for (Graph& g : pg.graphs) (void)cudaGraphExecDestroy(g.exec);
    if (pg.dyn) (void)cudaFree(pg.dyn);
  }
  programs_.clear();
  try {
    blas_.release();
  } catch (...) {
  }
  try {
    dnn_.release();
  } catch (...) {
  }
  env_.conv = nullptr;
  conv_path_chosen_ = false;
  alloc_.release_all();
  for (auto& [p, h] : host_allocs_) {
    if (h.last_use) (void)cudaEventDestroy(h.last_use);
    (void)cudaFreeHost(const_cast<void*>(p));
  }
  host_allocs_.clear();
  for (auto& [serial, e] : ring_events_) free_events_.push_back(e);
  ring_events_.clear();
  ring_regions_.clear();
  host_copies_.clear();
  for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
  free_events_.clear();
  for (ProfRec& r : prof_)
    for (cudaEvent_t e : r.ev) timing_events_.push_back(e);
  prof_.clear();
  for (cudaEvent_t e : timing_events_) (void)cudaEventDestroy(e);
  timing_events_.clear();
  if (ring_) (void)cudaFreeHost(ring_);
  if (workspace_) (void)cudaFree(workspace_);
  (void)cudaFree(scratch_);
  (void)cudaFree(status_dev_);
  (void)cudaFreeHost(status_host_);
  (void)cudaStreamDestroy(stream_);
  ring_ = nullptr;
  workspace_ = nullptr;
  scratch_ = nullptr;
  stream_ = nullptr;
}

// ---- memory ------------------------------------------------------------------

void CudaDevice::throw_oom(const char* op, size_t bytes) {
  size_t free_b = 0, total_b = 0;
  (void)cudaMemGetInfo(&free_b, &total_b);
  (void)cudaGetLastError();
  const AllocatorStats& s = alloc_.stats();
  throw OutOfMemory(detail::cat(
      "[", op, "] out of device memory on ", str(), ": expected ", bytes, " bytes (", mib(bytes),
      ") to fit, found ", mib(free_b), " free of ", mib(total_b), " (Switchyard holds ",
      mib(s.reserved_bytes), ", ", mib(s.allocated_bytes), " of it in use)"));
}

Buffer CudaDevice::allocate_impl(size_t bytes) {
  std::lock_guard lock(mu_);
  ensure();
  void* p = alloc_.allocate(bytes);
  if (!p) throw_oom("allocate", bytes);
  counters_.bytes_reserved = alloc_.stats().reserved_bytes;
  return {p, bytes};
}

Buffer CudaDevice::allocate_host_impl(size_t bytes) {
  std::lock_guard lock(mu_);
  ensure();
  void* p = nullptr;
  cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw OutOfMemory(detail::cat("[allocate_host] out of pinned host memory on ", str(),
                                  ": expected ", bytes, " bytes (", mib(bytes),
                                  "), found cudaHostAlloc failing with ", cudaGetErrorName(e)));
  }
  ++counters_.memory_allocations;
  host_allocs_[p] = {bytes, nullptr};
  return {p, bytes};
}

CudaDevice::HostAlloc* CudaDevice::host_alloc(const void* p) {
  auto it = host_allocs_.find(p);
  return it == host_allocs_.end() ? nullptr : &it->second;
}

CudaDevice::HostAlloc* CudaDevice::host_alloc_containing(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  for (auto& [base, h] : host_allocs_) {
    const char* b = static_cast<const char*>(base);
    if (c >= b && c + n <= b + h.bytes) return &h;
  }
  return nullptr;
}

void CudaDevice::note_host_use(HostAlloc* h) {
  if (!h) return;
  if (!h->last_use)
    SY_CUDA("transfer", cudaEventCreateWithFlags(&h->last_use, cudaEventDisableTiming));
  SY_CUDA("transfer", cudaEventRecord(h->last_use, stream_));
}

void* CudaDevice::host_pointer(Buffer b) {
  std::lock_guard lock(mu_);
  return host_alloc(b.handle) ? b.handle : nullptr;
}

void CudaDevice::wait_until_unused(Buffer b) {
  cudaEvent_t e = nullptr;
  {
    std::lock_guard lock(mu_);
    HostAlloc* h = host_alloc(b.handle);
    if (h && !h->last_use) return;  // never used by a queued copy
    if (h) {
      e = h->last_use;
      set_device();
    }
  }
  if (!e) {  // device memory: wait for the stream (bad-input reports stay for synchronize())
    std::lock_guard lock(mu_);
    if (!ready_ || down_) return;
    set_device();
    SY_CUDA("wait_until_unused", cudaStreamSynchronize(stream_));
    return;
  }
  // Outside the lock, so the main thread keeps enqueueing meanwhile. The
  // event lives as long as the buffer, which the caller holds.
  SY_CUDA("wait_until_unused", cudaEventSynchronize(e));
}

void CudaDevice::release_impl(Buffer b) {
  std::lock_guard lock(mu_);
  if (down_) return;  // the memory went with the device
  set_device();
  if (HostAlloc* h = host_alloc(b.handle)) {
    if (h->last_use) {  // queued copies may still read or write it
      SY_CUDA("release", cudaEventSynchronize(h->last_use));
      SY_CUDA("release", cudaEventDestroy(h->last_use));
    }
    host_allocs_.erase(b.handle);
    SY_CUDA("release", cudaFreeHost(b.handle));
    return;
  }
  alloc_.free(b.handle);  // reused only by work enqueued after this
  counters_.bytes_reserved = alloc_.stats().reserved_bytes;
}

// ---- transfers -----------------------------------------------------------------

cudaEvent_t CudaDevice::new_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  SY_CUDA("transfer", cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void CudaDevice::record_segment() {
  cudaEvent_t e = new_event();
  SY_CUDA("transfer", cudaEventRecord(e, stream_));
  ring_events_.push_back({next_serial_++, e});
  // Many small transfers without a synchronize(): retire those already done,
  // and wait for the older half only if too many are still in flight (so
  // ring_reserve's scan stays short).
  if (ring_events_.size() > kMaxSegments) {
    uint64_t done = 0;
    for (auto& [serial, ev] : ring_events_) {
      cudaError_t q = cudaEventQuery(ev);
      if (q == cudaErrorNotReady) {
        // Not an error, but the runtime records it as the thread's last
        // error: cleared, or the next launch check would report it.
        (void)cudaGetLastError();
        break;
      }
      SY_CUDA("transfer", q);
      done = serial;
    }
    if (done) retire_segments_through(done);
    if (ring_events_.size() > kMaxSegments)
      retire_segments_through(ring_events_[kMaxSegments / 2].first);
  }
}

// Waits for the transfers up to `serial` (one stream: the newest event at or
// before it covers the older ones), performs their host copies and frees
// their regions of the ring.
void CudaDevice::retire_segments_through(uint64_t serial) {
  cudaEvent_t last = nullptr;
  for (auto& [s, ev] : ring_events_)
    if (s <= serial) last = ev;
  if (last) SY_CUDA("transfer", cudaEventSynchronize(last));
  host_copies_.run_through(serial);
  ring_regions_.retire_through(serial);
  while (!ring_events_.empty() && ring_events_.front().first <= serial) {
    free_events_.push_back(ring_events_.front().second);
    ring_events_.pop_front();
  }
}

// Room for n bytes in the ring, used by the transfer record_segment() marks next.
size_t CudaDevice::ring_reserve(size_t n) {
  if (!ring_) {
    SY_CUDA("transfer",
            cudaHostAlloc(reinterpret_cast<void**>(&ring_), kRingBytes, cudaHostAllocDefault));
    ++counters_.memory_allocations;
  }
  n = (n + 255) & ~size_t(255);
  auto [begin, wait] = ring_regions_.probe(n);
  if (wait) retire_segments_through(wait);
  ring_regions_.take(begin, n, next_serial_);
  return size_t(begin);
}

void CudaDevice::upload_impl(Buffer dst, size_t off, const void* src, size_t n) {
  std::lock_guard lock(mu_);
  ensure();
  char* d = static_cast<char*>(dst.handle) + off;
  if (HostAlloc* h = host_alloc(dst.handle)) {  // pinned host memory: the host writes it
    if (h->last_use) SY_CUDA("upload", cudaEventSynchronize(h->last_use));
    int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
    std::memcpy(d, src, n);
    if (t0 >= 0) host_transfer("upload (host to pinned)", n, t0);
    return;
  }
  stage(d, src, n, "upload");
}

void CudaDevice::stage(void* dst, const void* src, size_t n, const char* op) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  for (size_t done = 0; done < n;) {
    size_t c = std::min(kChunk, n - done);
    size_t r = ring_reserve(c);
    std::memcpy(ring_ + r, s + done, c);
    ProfRec* t0 = prof_begin();
    SY_CUDA(op, cudaMemcpyAsync(d + done, ring_ + r, c, cudaMemcpyHostToDevice, stream_));
    prof_end(t0, "upload (staging)", c);
    record_segment();
    done += c;
  }
}

void CudaDevice::download_impl(Buffer src, size_t off, void* dst, size_t n) {
  std::lock_guard lock(mu_);
  ensure();
  const char* s = static_cast<const char*>(src.handle) + off;
  char* d = static_cast<char*>(dst);
  if (HostAlloc* h = host_alloc(src.handle)) {
    if (h->last_use) SY_CUDA("download", cudaEventSynchronize(h->last_use));
    int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
    std::memcpy(d, s, n);
    if (t0 >= 0) host_transfer("download (pinned to host)", n, t0);
    return;
  }
  // Into pinned memory of ours: straight there (complete by synchronize()).
  if (HostAlloc* h = host_alloc_containing(d, n)) {
    ProfRec* t0 = prof_begin();
    SY_CUDA("download", cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToHost, stream_));
    prof_end(t0, "download (to pinned)", n);
    note_host_use(h);
    return;
  }
  for (size_t done = 0; done < n;) {
    size_t c = std::min(kChunk, n - done);
    size_t r = ring_reserve(c);
    ProfRec* t0 = prof_begin();
    SY_CUDA("download", cudaMemcpyAsync(ring_ + r, s + done, c, cudaMemcpyDeviceToHost, stream_));
    prof_end(t0, "download (staging)", c);
    host_copies_.push(next_serial_, ring_ + r, d + done, c);
    record_segment();
    done += c;
  }
}

const char* CudaDevice::copy_kind(Buffer src, Buffer dst) {
  return host_alloc(src.handle)   ? "copy (pinned to device)"
         : host_alloc(dst.handle) ? "copy (device to pinned)"
                                  : "copy (device)";
}

void CudaDevice::copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t n) {
  std::lock_guard lock(mu_);
  ensure();
  if (n == 0) return;
  const char* s = static_cast<const char*>(src.handle) + so;
  char* d = static_cast<char*>(dst.handle) + dof;
  if (s < d + n && d < s + n) {
    // cudaMemcpy does not promise memmove semantics (the CPU backend's copy
    // is one): go through a temporary, reusable at once (stream order).
    void* tmp = alloc_.allocate(n);
    if (!tmp) throw_oom("copy", n);
    ProfRec* t0 = prof_begin();
    cudaError_t e1 = cudaMemcpyAsync(tmp, s, n, cudaMemcpyDefault, stream_);
    cudaError_t e2 =
        e1 == cudaSuccess ? cudaMemcpyAsync(d, tmp, n, cudaMemcpyDefault, stream_) : e1;
    alloc_.free(tmp);
    SY_CUDA("copy", e2);
    prof_end(t0, copy_kind(src, dst), n);
    note_host_use(host_alloc(src.handle));
    note_host_use(host_alloc(dst.handle));
    return;
  }
  ProfRec* t0 = prof_begin();
  SY_CUDA("copy", cudaMemcpyAsync(d, s, n, cudaMemcpyDefault, stream_));
  prof_end(t0, copy_kind(src, dst), n);
  note_host_use(host_alloc(src.handle));  // a pinned source or destination
  note_host_use(host_alloc(dst.handle));
}

// ---- profiling -------------------------------------------------------------------

cudaEvent_t CudaDevice::timing_event() {
  if (!timing_events_.empty()) {
    cudaEvent_t e = timing_events_.back();
    timing_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  SY_CUDA("profile", cudaEventCreateWithFlags(&e, cudaEventDefault));
  return e;
}

void CudaDevice::host_transfer(const char* kind, size_t bytes, int64_t t0) {
  profile::record_since(profile::Track::transfer, *this, kind, t0, bytes);
}

CudaDevice::ProfRec* CudaDevice::prof_begin() {
  if (!profile::enabled()) return nullptr;
  if (prof_.size() >= 4096) {  // bound what waits: harvest what is done
    SY_CUDA("profile", cudaStreamSynchronize(stream_));
    harvest();
  }
  ProfRec& r = prof_.emplace_back();
  r.host_ns = profile::now_ns();
  prof_mark(&r);
  return &r;
}

void CudaDevice::prof_mark(ProfRec* r) {
  r->ev.push_back(timing_event());
  SY_CUDA("profile", cudaEventRecord(r->ev.back(), stream_));
}

void CudaDevice::prof_end(ProfRec* r, const char* name, uint64_t bytes) {
  if (!r) return;
  r->name = name;
  r->bytes = bytes;
  prof_mark(r);
}

// After the stream is idle: elapsed times between each record's events,
// placed on the profiler's clock no earlier than the host enqueued the work
// or the previous work ended (one stream: it runs in order).
void CudaDevice::harvest() {
  std::string dev = str();
  std::vector<int64_t> t;
  for (ProfRec& r : prof_) {
    int64_t start = std::max(r.host_ns, prof_end_ns_);
    t.assign(1, start);
    bool lost = false;
    for (size_t j = 1; j < r.ev.size(); ++j) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, r.ev[0], r.ev[j]) != cudaSuccess) {
        (void)cudaGetLastError();  // a lost measurement, not an error of the program:
        lost = true;               // the record goes unreported
        break;
      }
      t.push_back(start + int64_t(double(ms) * 1e6));
    }
    if (!lost) record_timing(dev, r, t);
    prof_end_ns_ = t.back();
    for (cudaEvent_t e : r.ev) timing_events_.push_back(e);
  }
  prof_.clear();
}

// ---- status and synchronization -----------------------------------------------

void CudaDevice::check_status() {
  DeviceStatus st = *status_host_;
  if (st.code == 0) return;
  std::memset(status_host_, 0, sizeof(DeviceStatus));
  if (Kernel(st.kernel) == Kernel::embedding)
    throw Error(detail::cat("[embedding] expected indices in [0, ", st.bound, "), found ", st.value,
                            " at position ", st.row, " on ", str(), " (its rows are NaN)"));
  throw Error(detail::cat("[", kernel_name(Kernel(st.kernel)), "] expected labels in [0, ",
                          st.bound, "), found ", st.value, " at row ", st.row, " on ", str(),
                          " (the loss and its gradient are NaN)"));
}

// A failed synchronize: the downloads' callers may free their targets.
void CudaDevice::cancel_pending_downloads() noexcept {
  std::lock_guard lock(mu_);
  host_copies_.clear();
}

void CudaDevice::synchronize_impl() {
  std::lock_guard lock(mu_);
  if (!ready_ || down_) return;
  set_device();
  if (status_dirty_) {  // read the status words back and clear them, in stream order
    SY_CUDA("synchronize", cudaMemcpyAsync(status_host_, status_dev_, sizeof(DeviceStatus),
                                           cudaMemcpyDeviceToHost, stream_));
    SY_CUDA("synchronize", cudaMemsetAsync(status_dev_, 0, sizeof(DeviceStatus), stream_));
  }
  SY_CUDA("synchronize", cudaStreamSynchronize(stream_));
  harvest();
  if (!ring_events_.empty()) retire_segments_through(ring_events_.back().first);
  if (status_dirty_) {
    status_dirty_ = false;
    check_status();
  }
}

// ---- programs --------------------------------------------------------------------

void CudaDevice::launch_instr(const Program& p, size_t i) {
  const Instr& ins = p.instrs[i];
  const uint64_t* word =
      dyn_slots_ && dyn_index_[i] != kNoWord ? dyn_slots_ + dyn_index_[i] : nullptr;
  env_.rng_offset = word && kernel_has(ins.kernel, kRandomStream) ? word : nullptr;
  env_.lr = word && kernel_has(ins.kernel, kLearningRate) ? reinterpret_cast<const float*>(word)
                                                          : nullptr;
  dispatch(ins, ins.nmore ? &more_ptrs_[ins.more * 2] : &ptrs_[i * kMaxKernelArgs], env_);
}

void CudaDevice::enqueue(const Program& p) {
  for (size_t i = 0; i < p.instrs.size(); ++i) launch_instr(p, i);
}

CustomCuda* g_custom_cuda = nullptr;

std::string CudaDevice::custom_unavailable_reason() const {
  if (!g_custom_cuda)
    return "this build runs without NVRTC and the CUDA driver API (the CUDA emulation)";
  return g_custom_cuda->unavailable_reason();
}

void CudaDevice::prepare_custom(const KernelSpec& s, int64_t id) {
  // Loads are serialized (without the device's lock: NVRTC may take
  // seconds), so two threads never both load a kernel.
  auto loaded = [&] {
    std::lock_guard lock(mu_);
    return custom_fns_.count(id) > 0;
  };
  if (loaded()) return;  // every launch asks: no wait behind another kernel's compile
  std::lock_guard load_lock(custom_load_mu_);
  if (loaded()) return;
  const std::string what = detail::cat("custom kernel ", s.name);
  SY_CHECK(!s.cuda.empty(), what.c_str(), "expected CUDA source (KernelSpec::cuda) to run on ",
           str(), ", found none");
  SY_CHECK(g_custom_cuda, what.c_str(),
           "expected NVRTC and the CUDA driver API, found this build runs without them (the CUDA "
           "emulation)");
  const int major = cc_major_, minor = cc_minor_;
  SY_CHECK(major > 0, what.c_str(), "expected the compute capability of ", str(), ", found none");
  {
    std::lock_guard lock(mu_);
    ensure();  // the stream and the primary context
  }
  set_device();  // per thread
  // Before CUDA 12, cudaSetDevice does not make the primary context current
  // on a thread that made no other runtime call: cudaFree(nullptr) does.
  SY_CUDA("custom", cudaFree(nullptr));
  void* fn = g_custom_cuda->load(s, major, minor);
  std::lock_guard lock(mu_);
  custom_fns_.emplace(id, fn);
}

void CudaDevice::execute_impl(const Program& p, std::span<const Binding> bindings) {
  std::lock_guard lock(mu_);
  ensure();
  ptrs_.assign(p.instrs.size() * kMaxKernelArgs, nullptr);
  key_.clear();
  // TF32 for this run's f32 GEMMs and convolutions: baked into a captured
  // graph, so part of its key (after the launches' words: the shape hash
  // reads every kKeyWords-th word from the first).
  env_.tf32 = cc_major_ >= 8 && detail::float32_matmul_allows_tf32();
  // The multi-tensor launches' arguments: each one's address, and after a
  // launch's addresses, each one's element count (cuda_kernels.h).
  more_ptrs_.assign(p.more_args.size() * 2, nullptr);
  more_key_.clear();
  dyn_host_.clear();
  dyn_index_.assign(p.instrs.size(), kNoWord);
  dyn_slots_ = nullptr;
  bool has_gemm = false, has_conv = false;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& ins = p.instrs[i];
    // Argument j's address, its binding checked.
    auto resolve = [&](const Arg& a, uint32_t j) -> void* {
      SY_CHECK(a.slot < bindings.size() && bindings[a.slot].buffer, kernel_name(ins.kernel),
               "expected argument ", j, " bound to a buffer on ", str(), ", found slot ", a.slot,
               " unbound");
      const Binding& b = bindings[a.slot];
      SY_CHECK(b.offset + a.offset + a.bytes <= b.buffer.bytes, kernel_name(ins.kernel),
               "argument ", j, " reaches byte ", b.offset + a.offset + a.bytes, " of a ",
               b.buffer.bytes, "-byte buffer on ", str());
      return static_cast<char*>(b.buffer.handle) + b.offset + a.offset;
    };
    for (int j = 0; j < ins.nargs; ++j)
      ptrs_[i * kMaxKernelArgs + j] = resolve(ins.args[j], uint32_t(j));
    void** more = ins.nmore ? &more_ptrs_[ins.more * 2] : nullptr;
    for (uint32_t j = 0; j < ins.nmore; ++j) {
      const Arg& a = p.more_args[ins.more + j];
      more[j] = resolve(a, j);
      more[ins.nmore + j] = reinterpret_cast<void*>(uintptr_t(a.bytes / 4));
      more_key_.push_back(reinterpret_cast<uintptr_t>(more[j]));
      more_key_.push_back(a.bytes);
    }
    append_key(key_, ins, &ptrs_[i * kMaxKernelArgs]);
    if (const int slot = rng_offset_slot(ins.kernel); slot >= 0) {
      dyn_index_[i] = uint32_t(dyn_host_.size());
      dyn_host_.push_back(uint64_t(ins.params.int_slots()[slot]));
    } else if (const int f = lr_slot(ins.kernel); f >= 0) {
      uint32_t bits;  // the float in the word's low half (little-endian)
      std::memcpy(&bits, &ins.params.float_slots()[f], 4);
      dyn_index_[i] = uint32_t(dyn_host_.size());
      dyn_host_.push_back(bits);
    }
    has_gemm |= ins.kernel == Kernel::gemm;
    has_conv |= ins.kernel == Kernel::conv2d || ins.kernel == Kernel::conv2d_backward_input ||
                ins.kernel == Kernel::conv2d_backward_weight;
    status_dirty_ |= kernel_has(ins.kernel, kReportsStatus);
  }
  key_.push_back((has_gemm || has_conv) && env_.tf32);  // (other Programs: no new key)
  auto ensure_workspace = [&](const char* op) {
    if (workspace_) return;
    SY_CUDA(op, cudaMalloc(&workspace_, kWorkspaceBytes));
    ++counters_.memory_allocations;
  };
  if (has_conv && !conv_path_chosen_) {
    // cuDNN's convolutions when it loads (SWITCHYARD_CUDA_CONV: cuda_dnn.h),
    // else the own implicit-GEMM kernels. Chosen once per device.
    const ConvPath path = conv_path();
    if (path != ConvPath::own) {
      ensure_workspace("conv2d");
      try {
        dnn_.init(stream_, workspace_, kWorkspaceBytes);
        env_.conv = &conv_;
        register_exit_teardown();  // (as for cuBLAS below)
      } catch (const OutOfMemory&) {
        throw;
      } catch (const Error& e) {
        if (path == ConvPath::cudnn)
          throw Error(detail::cat("[conv2d] SWITCHYARD_CUDA_CONV=cudnn asks for cuDNN on ", str(),
                                  ", which cannot be used: ", e.what()));
      }
    }
    conv_path_chosen_ = true;
  }
  if (has_gemm && !blas_.ready()) {
    ensure_workspace("gemm");
    blas_.init(stream_, workspace_, kWorkspaceBytes);
    // cuBLAS carries its own CUDA runtime, whose exit-time teardown may
    // register now: register ours again so it runs first.
    register_exit_teardown();
  }
  ++runs_;
  if (ProfRec* r = p.instrs.empty() ? nullptr : prof_begin()) {
    // Profiled: eagerly, with an event after each launch (harvest() reads
    // one kernel per event after the first, whatever was reached).
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      launch_instr(p, i);
      r->kernels.push_back(p.instrs[i].kernel);
      prof_mark(r);
    }
    counters_.queue_submits += p.instrs.size();
    return;
  }
  if (graphs_enabled_ && !p.instrs.empty()) {
    if (programs_.size() >= kMaxPrograms &&
        !programs_.count(p.id)) {  // forget the least recently run
      auto lru = std::min_element(
          programs_.begin(), programs_.end(),
          [](const auto& a, const auto& b) { return a.second.last_run < b.second.last_run; });
      for (Graph& g : lru->second.graphs) (void)cudaGraphExecDestroy(g.exec);
      if (lru->second.dyn) (void)cudaFree(lru->second.dyn);  // waits for its last run
      programs_.erase(lru);
    }
    ProgramGraphs& pg = programs_[p.id];
    pg.last_run = runs_;
    if (!dyn_host_.empty()) {
      // The offsets and learning rates where this Program's graphs read them
      // (its launches are the same every run), written in stream order
      // before the run.
      if (!pg.dyn) {
        void* slots = nullptr;
        SY_CUDA("execute", cudaMalloc(&slots, dyn_host_.size() * sizeof(uint64_t)));
        pg.dyn = static_cast<uint64_t*>(slots);
        ++counters_.memory_allocations;
      }
      stage(pg.dyn, dyn_host_.data(), dyn_host_.size() * sizeof(uint64_t), "execute");
      dyn_slots_ = pg.dyn;
    }
    // The launches' shape first (every kKeyWords-th word: the kernels), then
    // the multi-tensor launches' addresses join the key.
    const uint64_t shape = hash_words(key_, kKeyWords);
    key_.insert(key_.end(), more_key_.begin(), more_key_.end());
    run_graph(p, pg, hash_words(key_), shape);
    return;
  }
  enqueue(p);
  counters_.queue_submits += p.instrs.size();
}

}  // namespace switchyard::cuda_impl
