// Fork-join thread pool used by the CPU kernels.
#include "thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace switchyard::cpu_impl {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
constexpr auto kSpin = std::chrono::microseconds(200);
}  // namespace

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

void ThreadPool::run_chunks() {
  for (;;) {
    int64_t lo = next_.fetch_add(chunk_);
    if (lo >= n_) return;
    (*fn_)(lo, std::min(n_, lo + chunk_));
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t chunks = std::min<int64_t>(size(), (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  chunk_ = (n + chunks - 1) / chunks;
  next_ = 0;
  pending_ = int(workers_.size());
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  run_chunks();
  while (pending_.load() > 0) cpu_relax();
  fn_ = nullptr;
}

void ThreadPool::work() {
  uint64_t seen = 0;
  for (;;) {
    auto until = std::chrono::steady_clock::now() + kSpin;
    int spins = 0;
    while (generation_.load() == seen && !stop_.load()) {
      cpu_relax();
      if (++spins % 256 == 0 && std::chrono::steady_clock::now() > until) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_++;
        cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
        sleepers_--;
      }
    }
    if (stop_.load()) return;
    seen = generation_.load();
    run_chunks();
    pending_.fetch_sub(1);
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
