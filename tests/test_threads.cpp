// SPDX-License-Identifier: MIT
// Several threads on one device: each trains its own model at the same time
// and gets exactly the losses of a run on its own; threads share a model for
// inference, and for training (taking turns, or getting a clear error). (Built and run under
// ThreadSanitizer by `.ci/run` when asked: see docs/testing.md.)
#include <barrier>
#include <cmath>
#include <mutex>
#include <thread>

#include "helpers.h"
#include "thread_pool.h"

namespace {

constexpr int64_t kIn = 20, kHidden = 32, kClasses = 4, kBatch = 32, kBatches = 8;

// A learnable task per thread: labels are the argmax of a fixed projection.
struct Task {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Task make_task(uint32_t seed) {
  Task t;
  t.x = random_vec(size_t(kBatch * kBatches * kIn), seed);
  auto proj = random_vec(size_t(kIn * kClasses), seed + 1000);
  for (int64_t i = 0; i < kBatch * kBatches; ++i) {
    int best = 0;
    float best_v = -1e30f;
    for (int c = 0; c < kClasses; ++c) {
      float v = 0;
      for (int j = 0; j < kIn; ++j) v += t.x[size_t(i * kIn + j)] * proj[size_t(j * kClasses + c)];
      if (v > best_v) best_v = v, best = c;
    }
    t.y.push_back(best);
  }
  return t;
}

std::shared_ptr<sy::nn::Sequential> make_model(sy::Device& d) {
  auto m = std::make_shared<sy::nn::Sequential>();
  m->add(std::make_shared<sy::nn::Linear>(kIn, kHidden, true, d))
      .add(std::make_shared<sy::nn::ReLU>())
      .add(std::make_shared<sy::nn::Linear>(kHidden, kClasses, true, d));
  return m;
}

// Trains `model` on `task` for `steps` steps with Adam, reading the loss
// back every step (each read is an evaluation and a download).
std::vector<float> train(sy::nn::Module& model, const Task& task, sy::Device& d, int steps) {
  sy::optim::Adam opt(model.parameters(), 1e-2f);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    int64_t b = s % kBatches;
    std::vector<float> xb(task.x.begin() + b * kBatch * kIn,
                          task.x.begin() + (b + 1) * kBatch * kIn);
    std::vector<int32_t> yb(task.y.begin() + b * kBatch, task.y.begin() + (b + 1) * kBatch);
    auto x = sy::from_vector(xb, {kBatch, kIn}, d);
    auto y = sy::from_vector(yb, {kBatch}, d);
    opt.zero_grad();
    auto loss = sy::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

class Threads : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override { SKIP_UNLESS_AVAILABLE(std::get<0>(GetParam())); }
};

TEST_P(Threads, EachTrainingItsOwnModelGetsTheSequentialLosses) {
  auto& d = sy::device(std::get<0>(GetParam()));
  const int threads = std::get<1>(GetParam());
  const int steps = 150;
  std::vector<Task> tasks;
  for (int t = 0; t < threads; ++t) tasks.push_back(make_task(uint32_t(17 + t)));

  // One after another: the reference.
  sy::manual_seed(5);
  std::vector<std::shared_ptr<sy::nn::Sequential>> models;
  for (int t = 0; t < threads; ++t) models.push_back(make_model(d));
  std::vector<std::vector<float>> expected;
  for (int t = 0; t < threads; ++t)
    expected.push_back(train(*models[size_t(t)], tasks[size_t(t)], d, steps));

  // All at once, from the same initial weights, released together.
  sy::manual_seed(5);
  models.clear();
  for (int t = 0; t < threads; ++t) models.push_back(make_model(d));
  std::vector<std::vector<float>> got{size_t(threads)};
  std::vector<std::string> errors{size_t(threads)};
  std::barrier start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        got[size_t(t)] = train(*models[size_t(t)], tasks[size_t(t)], d, steps);
      } catch (const std::exception& e) {
        errors[size_t(t)] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(errors[size_t(t)], "") << "thread " << t;
    ASSERT_EQ(got[size_t(t)].size(), size_t(steps)) << "thread " << t;
    for (int s = 0; s < steps; ++s)
      ASSERT_EQ(got[size_t(t)][size_t(s)], expected[size_t(t)][size_t(s)])
          << "thread " << t << ", step " << s;
    EXPECT_LT(got[size_t(t)].back(), 0.6f * got[size_t(t)].front()) << "thread " << t << " learns";
  }
  sy::synchronize(d);
}

// One model, several threads reading it at once (inference): every output is
// the one a single thread computes.
TEST_P(Threads, ShareOneModelForInference) {
  auto& d = sy::device(std::get<0>(GetParam()));
  const int threads = std::get<1>(GetParam());
  sy::manual_seed(9);
  auto model = make_model(d);
  model->train(false);
  std::vector<Task> tasks;
  std::vector<std::vector<float>> expected;
  for (int t = 0; t < threads; ++t) {
    tasks.push_back(make_task(uint32_t(40 + t)));
    sy::NoGradGuard no_grad;
    expected.push_back(
        (*model)(sy::from_vector(tasks.back().x, {kBatch * kBatches, kIn}, d)).to_vector<float>());
  }
  std::vector<int> mismatches(size_t(threads), 0);
  std::barrier start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      sy::NoGradGuard no_grad;
      start.arrive_and_wait();
      for (int r = 0; r < 50; ++r) {
        auto x = sy::from_vector(tasks[size_t(t)].x, {kBatch * kBatches, kIn}, d);
        if ((*model)(x).to_vector<float>() != expected[size_t(t)]) mismatches[size_t(t)]++;
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
}

// One model trained by several threads at once. Sharing is memory-safe
// and never silently wrong: a thread whose saved forward values were
// overwritten by another thread's optimizer step before its backward() ran
// gets the clear "modified in place" error (as PyTorch's version counter
// reports), and threads that take turns for whole steps (a lock over
// forward, backward and step) train the model with no error at all.
enum class Sharing { unsynchronized_one_optimizer, unsynchronized_optimizer_each, turns };

void train_shared(const std::string& dev, int threads, Sharing how) {
  auto& d = sy::device(dev);
  const int steps = 120;
  const Task task = make_task(71);
  sy::manual_seed(3);
  auto model = make_model(d);
  auto full_loss = [&] {
    sy::NoGradGuard no_grad;
    auto x = sy::from_vector(task.x, {kBatch * kBatches, kIn}, d);
    auto y = sy::from_vector(task.y, {kBatch * kBatches}, d);
    return sy::cross_entropy((*model)(x), y).item();
  };
  const float before = full_loss();
  sy::optim::Adam shared(model->parameters(), 5e-3f);
  std::mutex turn;
  std::vector<std::string> unexpected{size_t(threads)};
  std::vector<int> completed(size_t(threads), 0), refused(size_t(threads), 0),
      non_finite(size_t(threads), 0);
  std::barrier start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      sy::optim::Adam own(model->parameters(), 5e-3f);
      sy::optim::Optimizer& opt = how == Sharing::unsynchronized_optimizer_each
                                      ? static_cast<sy::optim::Optimizer&>(own)
                                      : static_cast<sy::optim::Optimizer&>(shared);
      start.arrive_and_wait();
      for (int s = 0; s < steps; ++s) {
        int64_t b = (s + t * 3) % kBatches;
        std::vector<float> xb(task.x.begin() + b * kBatch * kIn,
                              task.x.begin() + (b + 1) * kBatch * kIn);
        std::vector<int32_t> yb(task.y.begin() + b * kBatch, task.y.begin() + (b + 1) * kBatch);
        auto x = sy::from_vector(xb, {kBatch, kIn}, d);
        auto y = sy::from_vector(yb, {kBatch}, d);
        try {
          sy::Tensor loss;
          {
            std::unique_lock<std::mutex> lock(turn, std::defer_lock);
            if (how == Sharing::turns) lock.lock();
            opt.zero_grad();
            loss = sy::cross_entropy((*model)(x), y);
            loss.backward();
            opt.step();
          }
          // Read every third loss, outside the turn: the other steps stay
          // lazy, so one thread's updates run inside another's evaluations.
          if (s % 3 == 0 && !std::isfinite(loss.item())) non_finite[size_t(t)]++;
          completed[size_t(t)]++;
        } catch (const sy::Error& e) {
          std::string m = e.what();
          // Refused, each with its clear error: this thread's saved values
          // were overwritten by another's step; another thread's refused step
          // had its in-place updates dropped under a value this one still
          // reads; or this thread's pending work reads a parameter both
          // before and after another's update (one Adam launch updates every
          // parameter, so these meet more often than with one per parameter).
          if ((m.find("modified in place") != std::string::npos &&
               m.find("take turns") != std::string::npos) ||
              m.find("in-place update discarded by a failed evaluation") != std::string::npos ||
              m.find("read both before and after an in-place update") != std::string::npos)
            refused[size_t(t)]++;
          else
            unexpected[size_t(t)] = m;
        } catch (const std::exception& e) {
          unexpected[size_t(t)] = e.what();
        }
      }
    });
  for (auto& th : pool) th.join();
  int total_refused = 0;
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(unexpected[size_t(t)], "") << "thread " << t;
    EXPECT_EQ(non_finite[size_t(t)], 0) << "thread " << t;
    EXPECT_EQ(completed[size_t(t)] + refused[size_t(t)], steps) << "thread " << t;
    total_refused += refused[size_t(t)];
  }
  if (how == Sharing::turns) {
    EXPECT_EQ(total_refused, 0) << "taking turns never conflicts";
  }
  // Whatever the interleaving, the model is intact and has learned.
  const float after = full_loss();
  EXPECT_LT(after, 0.6f * before) << "the shared model learns: loss " << before << " -> " << after
                                  << " (" << total_refused << " steps refused)";
  sy::synchronize(d);
}

TEST_P(Threads, ShareOneModelAndOptimizerTakingTurnsForWholeSteps) {
  train_shared(std::get<0>(GetParam()), std::get<1>(GetParam()), Sharing::turns);
}

TEST_P(Threads, ShareOneModelAndOptimizerWithoutTurnsIsSafeOrAClearError) {
  train_shared(std::get<0>(GetParam()), std::get<1>(GetParam()),
               Sharing::unsynchronized_one_optimizer);
}

TEST_P(Threads, ShareOneModelWithAnOptimizerEachWithoutTurnsIsSafeOrAClearError) {
  train_shared(std::get<0>(GetParam()), std::get<1>(GetParam()),
               Sharing::unsynchronized_optimizer_each);
}

std::vector<std::tuple<std::string, int>> thread_cases() {
  std::vector<std::tuple<std::string, int>> cases;
  std::vector<std::string> devs{"cpu"};
  for (auto& g : gpu_devices()) devs.push_back(g);
  for (auto& d : devs)
    for (int n : {2, 4}) cases.emplace_back(d, n);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Devices, Threads, ::testing::ValuesIn(thread_cases()),
                         [](const auto& info) {
                           return device_param_name(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "_threads";
                         });

}  // namespace

// The CPU backend's fork-join pool (backends/cpu/thread_pool.h): more
// threads than CPUs take at most one chunk per CPU a region (the rest only
// took turns: the MLP's step was 3x slower at 16 threads on 2 cores), and
// still cover every index once, nest and rethrow.
TEST(CpuThreadPool, MoreThreadsThanCpusRunAtMostOneChunkPerCpu) {
  using sy::cpu_impl::ThreadPool;
  const int cpus = sy::cpu_impl::available_cpus();
  ASSERT_GE(cpus, 1);
  EXPECT_GE(sy::cpu_impl::physical_cores(), 1);
  EXPECT_LE(sy::cpu_impl::physical_cores(), cpus);
  ThreadPool small(1);
  EXPECT_EQ(small.active(), 1);
  ThreadPool over(cpus * 4 + 1);
  EXPECT_EQ(over.size(), cpus * 4 + 1);
  EXPECT_EQ(over.active(), cpus);
  constexpr int64_t n = 1 << 20;
  std::vector<int> hits(size_t(n), 0);
  std::mutex mu;
  int64_t chunks = 0;
  for (int round = 0; round < 50; ++round) {  // many regions: workers sleep and wake
    chunks = 0;
    over.parallel_for(n, 1024, [&](int64_t lo, int64_t hi) {
      {
        std::lock_guard lock(mu);
        ++chunks;
      }
      for (int64_t i = lo; i < hi; ++i) ++hits[size_t(i)];
    });
    ASSERT_LE(chunks, cpus) << "round " << round;
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)], 50) << i;
  // A nested region runs inline; an exception reaches the caller.
  int64_t inner = 0;
  over.parallel_for(4, 1, [&](int64_t lo, int64_t hi) {
    over.parallel_for(100, 1, [&](int64_t a, int64_t b) {
      std::lock_guard lock(mu);
      inner += (b - a) * (hi - lo);
    });
  });
  EXPECT_EQ(inner, 400);
  EXPECT_THROW(over.parallel_for(n, 1024,
                                 [](int64_t lo, int64_t) {
                                   if (lo == 0) throw sy::Error("chunk 0");
                                 }),
               sy::Error);
}

// Binary ops cut rows longer than a grain (32K elements) into blocks, so a
// flat op runs on every thread: every element is still computed once, with
// broadcasting strides.
TEST(CpuThreadPool, LongRowsOfABinaryOpAreSplitAndComputedOnce) {
  sy::Device& cpu = sy::backend_device("cpu");
  const int64_t cols = 100003;  // three blocks and a ragged one
  auto av = random_vec(size_t(3 * cols), 91), bv = random_vec(size_t(cols), 92);
  sy::Tensor a = sy::from_vector(av, {3, cols}, cpu), b = sy::from_vector(bv, {cols}, cpu);
  auto sum = (a + b).to_vector<float>();
  auto scaled = (a * sy::from_vector(std::vector<float>{2.f}, {1}, cpu)).to_vector<float>();
  ASSERT_EQ(sum.size(), size_t(3 * cols));
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const size_t i = size_t(r * cols + j);
      ASSERT_EQ(sum[i], av[i] + bv[size_t(j)]) << r << ", " << j;
      ASSERT_EQ(scaled[i], av[i] * 2.f) << r << ", " << j;
    }
}

// `switchyard devices` says how the CPU backend sizes its threads by work.
TEST(CpuThreadPool, TheDeviceReportsItsThreadsAndTheirGrain) {
  const auto& props = sy::cpu().info().properties;
  std::string threads, by_work;
  for (const auto& [k, v] : props) {
    if (k == "threads") threads = v;
    if (k == "threads_by_work") by_work = v;
  }
  EXPECT_NE(threads.find("cores="), std::string::npos) << threads;
  EXPECT_NE(by_work.find(std::to_string(sy::cpu_impl::kElementGrain) + " elements"),
            std::string::npos)
      << by_work;
  EXPECT_NE(by_work.find(std::to_string(sy::cpu_impl::kGemmSerialWork) + " multiply-adds"),
            std::string::npos)
      << by_work;
}
