// A small fork-join pool for the CPU backend's elementwise and reduction
// kernels. GEMM threads itself (OpenBLAS).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace switchyard::cpu_impl {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return int(workers_.size()) + 1; }
  // Runs fn(lo, hi) over [0, n) in chunks of at least `grain`, on the caller
  // and the workers; returns when all chunks are done.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void work();
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

ThreadPool& pool();

}  // namespace switchyard::cpu_impl
