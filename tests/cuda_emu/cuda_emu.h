// A CPU emulation of the CUDA execution model, just large enough to run
// backends/cuda/k_*.cu as C++ (they launch through SY_LAUNCH, which this
// turns into a call of sy_emu::Launch). It exists so that the kernels' index
// math, grid-stride loops, shared-memory tiles, __syncthreads and warp
// shuffles are executed and checked against the conformance suite on
// machines without an NVIDIA GPU. It says nothing about performance, memory
// ordering on real hardware, or cuBLAS.
//
// Model: the blocks of a launch run one after another; the threads of a block
// run as real OS threads (so __syncthreads and shuffles really wait for the
// others), x fastest, lanes 0-31 of each 32 forming a warp. __shared__
// variables become function statics: one copy, which is per block because
// blocks do not overlap. A thread that returns leaves its barriers, as an
// exited CUDA thread stops counting for __syncthreads.
#pragma once
#include <math.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using cudaStream_t = struct CUstream_st*;
using cudaEvent_t = struct CUevent_st*;
enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
inline const char* cudaGetErrorString(cudaError_t) { return "an error in the CPU emulation"; }

namespace sy_emu {

struct Block {
  std::unique_ptr<std::barrier<>> sync;                 // __syncthreads
  std::vector<std::unique_ptr<std::barrier<>>> warps;   // shuffles, one per warp
  std::vector<uint64_t> lanes;                          // shuffle exchange, 32 per warp
};

inline dim3 grid_dim, block_dim;
inline thread_local dim3 thread_idx, block_idx;
inline thread_local unsigned lane, warp;
inline thread_local Block* block;

// Runs body on every thread of every block of the grid.
inline void run(dim3 grid, dim3 bdim, const std::function<void()>& body) {
  grid_dim = grid;
  block_dim = bdim;
  const unsigned nt = bdim.x * bdim.y * bdim.z, nwarps = (nt + 31) / 32;
  Block b;
  dim3 current;
  bool quit = false;
  std::barrier<> start(nt + 1), done(nt + 1);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < nt; ++i)
    threads.emplace_back([&, i] {
      for (;;) {
        start.arrive_and_wait();
        if (quit) return;
        thread_idx = dim3(i % bdim.x, (i / bdim.x) % bdim.y, i / (bdim.x * bdim.y));
        block_idx = current;
        lane = i % 32;
        warp = i / 32;
        block = &b;
        body();
        b.sync->arrive_and_drop();
        b.warps[warp]->arrive_and_drop();
        done.arrive_and_wait();
      }
    });
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        b.sync = std::make_unique<std::barrier<>>(nt);
        b.warps.clear();
        for (unsigned w = 0; w < nwarps; ++w)
          b.warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, nt - 32 * w)));
        b.lanes.assign(size_t(nwarps) * 32, 0);
        current = dim3(x, y, z);
        start.arrive_and_wait();
        done.arrive_and_wait();
      }
  quit = true;
  start.arrive_and_wait();
  for (auto& t : threads) t.join();
}

// SY_LAUNCH(kernel, grid, block, stream)(args...) under emulation.
struct Launch {
  dim3 grid, bdim;
  Launch(dim3 g, dim3 b, cudaStream_t) : grid(g), bdim(b) {}  // one stream: launches run in order
  template <class F>
  auto operator->*(F kernel) const {
    return [g = grid, b = bdim, kernel](auto... args) { run(g, b, [&] { kernel(args...); }); };
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
T __shfl_xor_sync(unsigned, T v, int mask) {
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
