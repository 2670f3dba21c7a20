// A CPU emulation of the CUDA execution model, large enough to run
// backends/cuda as C++ (tests/cuda_emu): kernels launched through SY_LAUNCH
// (which is <<<...>>> under nvcc) run here on CPU threads, and the stream is
// asynchronous: work runs only when the host waits for it (cudart_emu.cpp).
// What it checks is listed in README.md (The CUDA backend). It says nothing
// about speed, memory ordering between blocks, or nvcc's code generation.
//
// Model: the blocks of a launch run one after another; the threads of a block
// run as real OS threads (so __syncthreads and shuffles really wait for the
// others), x fastest, lanes 0-31 of each 32 forming a warp. __shared__
// variables become function statics: one copy, which is per block because
// blocks do not overlap. A thread that returns leaves its barriers, as an
// exited CUDA thread stops counting for __syncthreads; a shuffle that reads
// an exited lane aborts (undefined in CUDA). Launches are checked against
// CUDA's limits, and a bad one sets the thread's last error, as in CUDA.
#pragma once
#include <math.h>

#include <atomic>
#include <barrier>
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

struct Block {
  std::unique_ptr<std::barrier<>> sync;                // __syncthreads
  std::vector<std::unique_ptr<std::barrier<>>> warps;  // shuffles, one per warp
  std::vector<uint64_t> lanes;                         // shuffle exchange, 32 per warp
  std::vector<char> exited;                            // per thread: returned from the kernel
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

// The threads of one block size, kept for the whole run (creating a
// thousand threads per launch would dominate the time).
struct Pool {
  const unsigned nt;
  std::vector<std::thread> threads;
  std::atomic<uint64_t> generation{0};
  std::atomic<unsigned> remaining{0};
  const std::function<void()>* body = nullptr;
  Block blk;
  dim3 current, bdim;

  explicit Pool(dim3 b) : nt(b.x * b.y * b.z), bdim(b) {
    for (unsigned i = 0; i < nt; ++i) threads.emplace_back([this, i] { work(i); });
  }
  void work(unsigned i) {
    for (uint64_t seen = 0;;) {
      generation.wait(seen);
      seen = generation.load();
      thread_idx = dim3(i % bdim.x, (i / bdim.x) % bdim.y, i / (bdim.x * bdim.y));
      block_idx = current;
      lane = i % 32;
      warp = i / 32;
      block = &blk;
      (*body)();
      blk.exited[i] = 1;
      blk.sync->arrive_and_drop();  // an exited thread stops counting
      blk.warps[warp]->arrive_and_drop();
      if (remaining.fetch_sub(1) == 1) remaining.notify_one();
    }
  }
  void run_block(dim3 at, const std::function<void()>& f) {
    const unsigned nwarps = (nt + 31) / 32;
    blk.sync = std::make_unique<std::barrier<>>(nt);
    blk.warps.clear();
    for (unsigned w = 0; w < nwarps; ++w)
      blk.warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, nt - 32 * w)));
    blk.lanes.assign(size_t(nwarps) * 32, 0);
    blk.exited.assign(nt, 0);
    current = at;
    body = &f;
    remaining = nt;
    generation.fetch_add(1);
    generation.notify_all();
    for (unsigned r; (r = remaining.load()) != 0;) remaining.wait(r);
  }
};

// Runs body on every thread of every block of the grid, block after block.
inline void run(dim3 grid, dim3 bdim, const std::function<void()>& body) {
  static std::vector<Pool*> pools;  // never freed: their threads wait until the process ends
  Pool* pool = nullptr;
  for (Pool* p : pools)
    if (p->bdim.x == bdim.x && p->bdim.y == bdim.y && p->bdim.z == bdim.z) pool = p;
  if (!pool) pools.push_back(pool = new Pool(bdim));
  grid_dim = grid;
  block_dim = bdim;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) pool->run_block(dim3(x, y, z), body);
}

// The device's one stream. Work is queued and runs, in order, only when the
// host waits (stream or event synchronize, an implicitly synchronizing call):
// a backend that reads a result, or reuses memory, before waiting for it sees
// stale data here as on a GPU. While the stream is being captured, work is
// recorded instead (with its arguments, by value, as graph nodes hold them).
struct Graph {
  std::vector<std::function<void()>> nodes;
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
inline void enqueue(std::function<void()> work) {
  std::lock_guard lock(stream_mu);
  if (Graph* g = capturing.load()) {
    g->nodes.push_back(std::move(work));
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
      enqueue([=] { run(g, b, [&] { kernel(args...); }); });
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
  block->warps[warp]->arrive_and_wait();
  if (block->exited[size_t(warp) * 32 + (lane ^ unsigned(mask))])
    fail("__shfl_xor_sync reads a lane that has exited (undefined in CUDA)");
  got = slots[lane ^ unsigned(mask)];
  block->warps[warp]->arrive_and_wait();
  T r;
  std::memcpy(&r, &got, sizeof(T));
  return r;
}

}  // namespace sy_emu

#define threadIdx (::sy_emu::thread_idx)
#define blockIdx (::sy_emu::block_idx)
#define blockDim (::sy_emu::block_dim)
#define gridDim (::sy_emu::grid_dim)

inline void __syncthreads() { ::sy_emu::block->sync->arrive_and_wait(); }
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
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline uint32_t __umulhi(uint32_t a, uint32_t b) { return uint32_t((uint64_t(a) * b) >> 32); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
