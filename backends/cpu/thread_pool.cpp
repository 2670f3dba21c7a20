// SPDX-License-Identifier: MIT
// Fork-join thread pool used by the CPU kernels.
#include "thread_pool.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#ifdef __linux__
#include <sched.h>
#endif

#include "switchyard/error.h"

namespace switchyard::cpu_impl {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
constexpr auto kSpin = std::chrono::microseconds(200);
// Set on the workers and on a caller inside a region: a nested
// parallel_for runs inline instead of waiting for the region it is part of.
thread_local bool t_in_region = false;
}  // namespace

int available_cpus() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

int physical_cores() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    std::set<std::string> cores;  // one sibling list per physical core
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(c) +
                      "/topology/thread_siblings_list");
      std::string siblings;
      if (!std::getline(f, siblings)) return available_cpus();
      cores.insert(siblings);
    }
    if (!cores.empty()) return int(cores.size());
  }
#endif
  return available_cpus();
}

ThreadPool::ThreadPool(int threads) {
  const int cpus = available_cpus();
  active_ = std::max(1, std::min(threads, cpus));
  spin_ = threads <= cpus;
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

void ThreadPool::run_chunks(uint32_t gen) {
  for (;;) {
    uint64_t t = ticket_.load();
    if (uint32_t(t >> 32) != gen || int64_t(t & 0xffffffffu) >= chunks_) return;
    if (!ticket_.compare_exchange_weak(t, t + 1)) continue;
    int64_t lo = int64_t(t & 0xffffffffu) * chunk_;
    try {
      (*fn_)(lo, std::min(n_, lo + chunk_));
    } catch (...) {  // rethrown on the caller: never terminate from a worker
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    done_.fetch_add(1);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t chunks = std::min<int64_t>(active_, (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1 || workers_.empty() || t_in_region) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> region(region_mu_);
  t_in_region = true;
  struct Leave {
    ~Leave() { t_in_region = false; }
  } leave;
  uint32_t gen = generation_.load() + 1;
  // The new generation's tickets first: a worker still in the last
  // region's run_chunks, holding a stale ticket, then fails its
  // compare-exchange instead of taking a chunk of this region with the new
  // fields (which it could, between chunks_ and ticket_, when they were
  // stored the other way round).
  ticket_ = uint64_t(gen) << 32;
  fn_ = &fn;
  n_ = n;
  chunk_ = (n + chunks - 1) / chunks;
  chunks_ = (n + chunk_ - 1) / chunk_;
  done_ = 0;
  generation_ = gen;
  if (int asleep = sleepers_.load(); asleep > 0) {
    // As many as there are chunks besides the caller's: waking every
    // sleeper of an oversubscribed pool would have them take turns on the
    // CPUs the chunks need.
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t i = std::min<int64_t>(asleep, chunks - 1); i > 0; --i) cv_.notify_one();
  }
  // The caller takes chunks too, and all of them if the workers are late.
  run_chunks(gen);
  // Then waits: spinning a while when every thread has a CPU of its own,
  // else yielding it to the threads still running chunks.
  for (int spins = 0; done_.load() < chunks_; ++spins) {
    if (spin_ && spins < (1 << 14))
      cpu_relax();
    else
      std::this_thread::yield();
  }
  if (error_) {
    std::exception_ptr e;
    std::swap(e, error_);
    std::rethrow_exception(e);
  }
}

void ThreadPool::work() {
  t_in_region = true;
  uint32_t seen = 0;
  for (;;) {
    auto until = std::chrono::steady_clock::now() + (spin_ ? kSpin : std::chrono::microseconds(0));
    int spins = 0;
    while (generation_.load() == seen && !stop_.load()) {
      cpu_relax();
      if ((!spin_ || ++spins % 256 == 0) && std::chrono::steady_clock::now() > until) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_++;
        cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
        sleepers_--;
      }
    }
    if (stop_.load()) return;
    seen = generation_.load();
    run_chunks(seen);
  }
}

// SWITCHYARD_CPU_THREADS, checked: a typo or a huge value must not start
// threads until the host's process limit runs out. Thrown from the first
// CPU kernel (and again until it is fixed), not at start-up.
int threads_from_env() {
  constexpr int kMaxThreads = 1024;
  const char* e = std::getenv("SWITCHYARD_CPU_THREADS");
  // Default: one thread per physical core the process may run on (an SMT
  // sibling shares its core's FMA units: a second GEMM thread there only
  // competes for them).
  if (!e || !*e) return physical_cores();
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(e, &end, 10);
  SY_CHECK(errno == 0 && *end == '\0' && v >= 1 && v <= kMaxThreads, "cpu",
           "expected SWITCHYARD_CPU_THREADS to be an integer from 1 to ", kMaxThreads, ", found '",
           e, "'");
  return int(v);
}

ThreadPool& pool() {
  static ThreadPool p(threads_from_env());
  return p;
}

}  // namespace switchyard::cpu_impl
