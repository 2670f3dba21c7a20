// A small fork-join pool for the CPU backend. Workers spin briefly between
// parallel regions (a training step issues many in a row) and then sleep.
#pragma once
#include <atomic>
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
  // and the workers; returns when all chunks are done. Not reentrant.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void work();
  void run_chunks();
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

ThreadPool& pool();

}  // namespace switchyard::cpu_impl
