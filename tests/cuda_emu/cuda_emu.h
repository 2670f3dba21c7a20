// SPDX-License-Identifier: MIT
// A CPU emulation of the CUDA execution model, large enough to run
// backends/cuda as C++ (tests/cuda_emu): kernels launched through SY_LAUNCH
// (which is <<<...>>> under nvcc) run here on CPU threads, and the stream is
// asynchronous: work runs only when the host waits for it (cudart_emu.cpp).
// What it checks is listed in README.md (The CUDA backend). It says nothing
// about speed, memory ordering between blocks, or nvcc's code generation.
//
// Model: the blocks of a launch run one after another; the threads of a block
// run as fibers (so __syncthreads and shuffles really wait for the others),
// x fastest, lanes 0-31 of each 32 forming a warp. __shared__
// variables become function statics: one copy, which is per block because
// blocks do not overlap. A thread that returns leaves its barriers, as an
// exited CUDA thread stops counting for __syncthreads; a shuffle that reads
// an exited lane aborts (undefined in CUDA). Launches are checked against
// CUDA's limits, and a bad one sets the thread's last error, as in CUDA.
#pragma once
#include <math.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

// Qualifiers first: the toolkit's host_defines.h keeps what is defined (and
// where a toolkit header came first, these replace its empty ones).
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

// The toolkit's own types (cudaError_t, cudaStream_t, dim3, ...); its
// functions are replaced by the sy_emu_* ones below (cudart_emu.h).
#include <driver_types.h>
#include <vector_types.h>

namespace sy_emu {

// A barrier between the fibers of one block: arrive_and_wait yields to the
// scheduler until the phase completes; an exited thread drops out of it.
struct FiberBarrier {
  unsigned expected = 0, count = 0;
  uint64_t phase = 0;
  void arrive_and_wait();
  void arrive_and_drop();
};

struct Block {
  FiberBarrier sync;                // __syncthreads
  std::vector<FiberBarrier> warps;  // shuffles, one per warp
  std::vector<uint64_t> lanes;      // shuffle exchange, 32 per warp
  std::vector<char> exited;         // per thread: returned from the kernel
};

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "[cuda emulation] %s\n", what);
  std::abort();
}

// The thread's last error (cudaGetLastError reads and clears it).
inline thread_local cudaError_t last_error = cudaSuccess;

inline dim3 grid_dim, block_dim;
inline thread_local dim3 thread_idx, block_idx;
inline thread_local unsigned lane, warp;
inline thread_local Block* block;

// The threads of a block run as fibers on the host thread that
// runs the stream, switched at __syncthreads and shuffles. An earlier
// version gave each CUDA thread an OS thread: 256 of them on two cores spent
// most of their time in the barriers' sched_yield spins. Fibers wait at a
// barrier just as truly, and a fiber that never gets there is reported as
// the deadlock it would be. Each warp runs ahead to its next __syncthreads
// before the next warp starts, and the order alternates between passes and
// blocks, so a missing __syncthreads shows whichever warp's data is read
// too early (or overwritten too soon).
// Switching between fibers: on x86-64 a switch saves and restores only the
// callee-saved registers and the FP control words (sy_emu_switch,
// cudart_emu.cpp); glibc's swapcontext also makes a sigprocmask system call
// each time, which made up half the emulation's time. Elsewhere (and with
// CET shadow stacks, which the hand-made switch does not maintain), ucontext.
#if defined(__x86_64__) && defined(__linux__) && !defined(__ILP32__) && \
    !(defined(__CET__) && (__CET__ & 2))
#define SY_EMU_ASM_SWITCH 1
#else
#define SY_EMU_ASM_SWITCH 0
#endif
#if SY_EMU_ASM_SWITCH
extern "C" void sy_emu_switch(void** save_sp, void* load_sp);
struct FiberContext {
  void* sp = nullptr;
};
// The new fiber's stack as sy_emu_switch leaves one: FP control words, six
// registers, then the return address, fn (entered as if called: a 16-byte
// aligned stack less the return address).
inline void fiber_start(FiberContext& c, char* stack, size_t size, void (*fn)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t(15);
  auto* words = reinterpret_cast<uint64_t*>(top) - 9;
  std::memset(words, 0, 9 * sizeof(uint64_t));
  uint32_t mxcsr;  // the host thread's FP control words, as a new thread inherits them
  uint16_t fpcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpcw));
  std::memcpy(words, &mxcsr, 4);
  std::memcpy(reinterpret_cast<char*>(words) + 4, &fpcw, 2);
  words[7] =
      reinterpret_cast<uint64_t>(fn);  // ret's target; words[8] stands for fn's return address
  c.sp = words;
}
inline void fiber_switch(FiberContext& from, FiberContext& to) { sy_emu_switch(&from.sp, to.sp); }
#else
struct FiberContext {
  ucontext_t uc{};
};
inline void fiber_start(FiberContext& c, char* stack, size_t size, void (*fn)()) {
  if (getcontext(&c.uc) != 0) fail("getcontext failed");
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;  // fn never returns
  makecontext(&c.uc, fn, 0);
}
inline void fiber_switch(FiberContext& from, FiberContext& to) {
  if (swapcontext(&from.uc, &to.uc) != 0) fail("swapcontext failed");
}
#endif

struct Scheduler {
  static constexpr size_t kStack = size_t(256) << 10;  // per fiber, guard page below
  std::vector<char*> stacks;                           // mmap'ed, kept for the run
  std::vector<FiberContext> fibers;
  FiberContext main;
  unsigned running = 0;
  uint64_t progress = 0;  // arrivals and exits: a pass without any is a deadlock
  uint64_t blocks = 0;    // run so far: the first pass's order alternates with them
  const std::function<void()>* body = nullptr;
  dim3 bdim;
  Block blk;

  Scheduler() = default;
  Scheduler(const Scheduler&) = delete;
  void place(unsigned i) {  // the CUDA identity of fiber i
    thread_idx = dim3(i % bdim.x, (i / bdim.x) % bdim.y, i / (bdim.x * bdim.y));
    lane = i % 32;
    warp = i / 32;
    block = &blk;
    running = i;
  }
  void yield() { fiber_switch(fibers[running], main); }
  [[noreturn]] static void entry();
  void run_block(dim3 at, dim3 b, const std::function<void()>& f) {
    bdim = b;
    const unsigned nt = b.x * b.y * b.z, nwarps = (nt + 31) / 32;
    while (stacks.size() < nt) {
      void* m = mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) fail("cannot map a fiber stack");
      // The lowest page: an overflow faults instead of corrupting.
      if (mprotect(m, size_t(sysconf(_SC_PAGESIZE)), PROT_NONE) != 0)
        fail("cannot guard a fiber stack");
      stacks.push_back(static_cast<char*>(m));
    }
    fibers.resize(nt);
    blk.sync = FiberBarrier{nt};
    blk.warps.assign(nwarps, FiberBarrier{});
    for (unsigned w = 0; w < nwarps; ++w) blk.warps[w].expected = std::min(32u, nt - 32 * w);
    blk.lanes.assign(size_t(nwarps) * 32, 0);
    blk.exited.assign(nt, 0);
    block_idx = at;
    body = &f;
    for (unsigned i = 0; i < nt; ++i) fiber_start(fibers[i], stacks[i], kStack, &Scheduler::entry);
    // Warps run ahead of each other, as they may on a GPU: each warp runs
    // until all its threads wait at __syncthreads (or have exited), then
    // the next; the warps' order, and the lanes', alternates between passes.
    unsigned alive = nt;
    for (uint64_t pass = ++blocks; alive > 0; ++pass) {
      const uint64_t before = progress;
      const bool forward = pass % 2;
      for (unsigned kw = 0; kw < nwarps; ++kw) {
        const unsigned w = forward ? kw : nwarps - 1 - kw, lanes = std::min(32u, nt - 32 * w);
        for (uint64_t start = progress - 1; progress != start;) {
          start = progress;
          for (unsigned k = 0; k < lanes; ++k) {
            const unsigned i = 32 * w + (forward ? k : lanes - 1 - k);
            if (blk.exited[i]) continue;
            place(i);
            fiber_switch(main, fibers[i]);
            if (blk.exited[i]) --alive;
          }
        }
      }
      if (alive > 0 && progress == before)
        fail(
            "a deadlock: threads wait at a __syncthreads or shuffle that others of the block never "
            "reach");
    }
  }
};
// Never destroyed (nor its stacks unmapped): a device torn down by a static
// destructor may still drain queued launches after thread_locals are gone.
inline Scheduler& sched() {
  thread_local Scheduler* s = new Scheduler;
  return *s;
}

[[noreturn]] inline void Scheduler::entry() {
  Scheduler& s = sched();
  (*s.body)();
  const unsigned i = s.running;
  s.blk.exited[i] = 1;
  ++s.progress;
  s.blk.sync.arrive_and_drop();  // an exited thread stops counting
  s.blk.warps[i / 32].arrive_and_drop();
  s.yield();  // for good: the next launch starts the fiber afresh
  fail("an exited fiber was resumed");
}

inline void FiberBarrier::arrive_and_wait() {
  const uint64_t my_phase = phase;
  ++sched().progress;
  if (++count == expected) {
    count = 0;
    ++phase;
    return;
  }
  while (phase == my_phase) sched().yield();  // the scheduler places us again
}
inline void FiberBarrier::arrive_and_drop() {
  --expected;
  if (count > 0 && count == expected) {
    count = 0;
    ++phase;
  }
}

// Runs body on every thread of every block of the grid, block after block.
inline void run(dim3 grid, dim3 bdim, const std::function<void()>& body) {
  grid_dim = grid;
  block_dim = bdim;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) sched().run_block(dim3(x, y, z), bdim, body);
}

// The device's one stream. Work is queued and runs, in order, only when the
// host waits (stream or event synchronize, an implicitly synchronizing call):
// a backend that reads a result, or reuses memory, before waiting for it sees
// stale data here as on a GPU. While the stream is being captured, work is
// recorded instead (with its arguments, by value, as graph nodes hold them).
// Node kinds, for cudaGraphExecUpdate's topology check.
enum NodeKind : int { kOtherNode, kKernelNode, kMemcpyNode, kMemsetNode };
struct Graph {
  std::vector<std::function<void()>> nodes;
  std::vector<int> kinds;  // NodeKind of each node
};
inline std::mutex stream_mu;  // the queue; also serializes running it
inline std::deque<std::function<void()>> pending;
inline uint64_t enqueued = 0, completed = 0;  // operation counts
inline cudaStream_t device_stream = nullptr;  // the one cudaStreamCreateWithFlags made
inline std::atomic<Graph*> capturing{nullptr};
inline std::atomic<std::thread::id> capturing_thread{};
inline std::atomic<bool> capture_invalidated{false};

inline bool on_device_stream(cudaStream_t s) {
  if (s == device_stream && s) return true;
  last_error = cudaErrorInvalidResourceHandle;
  return false;
}
inline void enqueue(std::function<void()> work, NodeKind kind = kOtherNode) {
  std::lock_guard lock(stream_mu);
  if (Graph* g = capturing.load()) {
    g->nodes.push_back(std::move(work));
    g->kinds.push_back(kind);
    return;
  }
  pending.push_back(std::move(work));
  ++enqueued;
}
// Runs queued work up to operation number `upto` (all of it by default).
inline void drain(uint64_t upto = UINT64_MAX) {
  std::lock_guard lock(stream_mu);
  while (completed < upto && !pending.empty()) {
    auto work = std::move(pending.front());
    pending.pop_front();
    ++completed;
    work();
  }
}
// CUDA's thread-local capture mode refuses unsafe calls (sync, allocation)
// from the capturing thread, and such a call invalidates the capture.
inline bool refused_in_capture() {
  if (capturing.load() && capturing_thread.load() == std::this_thread::get_id()) {
    capture_invalidated = true;
    return true;
  }
  return false;
}

inline bool valid_launch(dim3 g, dim3 b) {
  unsigned long long threads = 1ull * b.x * b.y * b.z;
  return g.x >= 1 && g.y >= 1 && g.z >= 1 && g.y <= 65535 && g.z <= 65535 && b.x >= 1 && b.y >= 1 &&
         b.z >= 1 && b.x <= 1024 && b.y <= 1024 && b.z <= 64 && threads <= 1024;
}

// SY_LAUNCH(kernel, grid, block, stream)(args...) under emulation.
struct Launch {
  dim3 grid, bdim;
  cudaStream_t stream;
  Launch(dim3 g, dim3 b, cudaStream_t s) : grid(g), bdim(b), stream(s) {}
  template <class F>
  auto operator->*(F kernel) const {
    return [g = grid, b = bdim, s = stream, kernel](auto... args) {
      if (!valid_launch(g, b)) {
        last_error = cudaErrorInvalidConfiguration;
        return;
      }
      if (!on_device_stream(s)) return;
      enqueue([=] { run(g, b, [&] { kernel(args...); }); }, kKernelNode);
    };
  }
};

template <class T>
T shfl_xor(T v, int mask) {
  static_assert(sizeof(T) <= 8);
  uint64_t bits = 0, got = 0;
  std::memcpy(&bits, &v, sizeof(T));
  uint64_t* slots = block->lanes.data() + size_t(warp) * 32;
  slots[lane] = bits;
  block->warps[warp].arrive_and_wait();
  if (block->exited[size_t(warp) * 32 + (lane ^ unsigned(mask))])
    fail("__shfl_xor_sync reads a lane that has exited (undefined in CUDA)");
  got = slots[lane ^ unsigned(mask)];
  block->warps[warp].arrive_and_wait();
  T r;
  std::memcpy(&r, &got, sizeof(T));
  return r;
}

// x rounded to TF32 (8-bit exponent, 10-bit mantissa), to nearest even: how
// tensor cores read f32 inputs when TF32 is allowed (cuBLAS, cuDNN).
inline float to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x0fffu + ((u >> 13) & 1u)) & ~0x1fffu;
  std::memcpy(&x, &u, 4);
  return x;
}

// Emulated cuDNN (cudnn_emu.cpp), for tests: per direction (forward,
// backward data, backward filter), the runs made and the last algorithm
// run; and the algorithm queries by timing (Find...Ex) and by heuristics.
inline std::atomic<int> cudnn_runs[3];
inline std::atomic<int> cudnn_last_algo[3];
inline std::atomic<int> cudnn_timed_queries{0}, cudnn_heuristic_queries{0};

}  // namespace sy_emu

#define threadIdx (::sy_emu::thread_idx)
#define blockIdx (::sy_emu::block_idx)
#define blockDim (::sy_emu::block_dim)
#define gridDim (::sy_emu::grid_dim)

inline void __syncthreads() { ::sy_emu::block->sync.arrive_and_wait(); }
template <class T>
T __shfl_xor_sync(unsigned members, T v, int mask) {
  if (members != 0xffffffffu) ::sy_emu::fail("__shfl_xor_sync with a partial mask: not emulated");
  return ::sy_emu::shfl_xor(v, mask);
}
inline int atomicCAS(int* p, int expected, int desired) {
  std::atomic_ref<int>(*p).compare_exchange_strong(expected, desired);
  return expected;  // the old value, as CUDA's
}
inline int atomicExch(int* p, int v) { return std::atomic_ref<int>(*p).exchange(v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_add(v);  // the old value, as CUDA's
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline uint32_t __umulhi(uint32_t a, uint32_t b) { return uint32_t((uint64_t(a) * b) >> 32); }
// Never contracted into an FMA (the emulated kernels are compiled with
// contraction on, as nvcc compiles them): each result is stored rounded.
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
