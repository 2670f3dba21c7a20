// Fork-join thread pool used by the CPU kernels.
#include "thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace switchyard::cpu_impl {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t chunks = std::min<int64_t>(size(), (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  fn_ = &fn;
  n_ = n;
  chunk_ = (n + chunks - 1) / chunks;
  next_ = 0;
  active_ = int(workers_.size());
  generation_++;
  lock.unlock();
  cv_.notify_all();
  // The caller takes chunks too.
  for (;;) {
    lock.lock();
    int64_t lo = next_;
    next_ += chunk_;
    lock.unlock();
    if (lo >= n) break;
    fn(lo, std::min(n, lo + chunk_));
  }
  lock.lock();
  done_cv_.wait(lock, [&] { return active_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::work() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    for (;;) {
      int64_t lo = next_;
      next_ += chunk_;
      if (lo >= n_) break;
      lock.unlock();
      (*fn_)(lo, std::min(n_, lo + chunk_));
      lock.lock();
    }
    if (--active_ == 0) done_cv_.notify_all();
  }
}

ThreadPool& pool() {
  static ThreadPool p([] {
    if (const char* e = std::getenv("SWITCHYARD_CPU_THREADS")) return std::max(1, std::atoi(e));
    return int(std::max(1u, std::thread::hardware_concurrency()));
  }());
  return p;
}

}  // namespace switchyard::cpu_impl
