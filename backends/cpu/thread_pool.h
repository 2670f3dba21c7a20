// SPDX-License-Identifier: MIT
// A small fork-join pool for the CPU backend. Workers spin briefly between
// parallel regions (a training step issues many in a row) and then sleep;
// when the pool has more threads than the process may run on at once
// (SWITCHYARD_CPU_THREADS past the CPUs), nobody spins: waiting threads
// sleep or yield, and a region takes at most one chunk per CPU.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace switchyard::cpu_impl {

// Work per thread, by kernel kind (what `switchyard devices` reports):
// elementwise, row and pooling kernels take a thread per kElementGrain
// elements (a chunk worth a thread's wake-up); a GEMM below kGemmSerialWork
// multiply-adds runs on the calling thread alone, a larger one splits the
// larger side of C over the threads in multiples of 16.
constexpr int64_t kElementGrain = int64_t(1) << 15;
constexpr int64_t kGemmSerialWork = int64_t(1) << 18;

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return int(workers_.size()) + 1; }
  // The threads a region runs on at most: size(), but no more than the
  // CPUs the process may run on (more would only take turns).
  int active() const { return active_; }
  // Runs fn(lo, hi) over [0, n) in chunks of at least `grain`, on the caller
  // and the workers; returns when all chunks are done. Safe from any number
  // of threads: one region runs at a time (others wait for it), and a call
  // from inside a region (a kernel calling a kernel) runs inline.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void work();
  void run_chunks(uint32_t generation);
  std::vector<std::thread> workers_;
  std::mutex region_mu_;  // one parallel region at a time
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  std::atomic<int64_t> chunks_{0};
  // Chunk tickets: generation in the high 32 bits, next chunk in the low 32,
  // so a worker that wakes late can never take a chunk of a later region.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> sleepers_{0};
  int active_ = 1;
  bool spin_ = true;  // false when oversubscribed
  std::atomic<bool> stop_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;  // first exception of the current region
};

ThreadPool& pool();

// The CPUs this process may run on (its affinity mask), and the physical
// cores among them (SMT siblings counted once; the CPU count where the
// topology is not readable).
int available_cpus();
int physical_cores();

}  // namespace switchyard::cpu_impl
