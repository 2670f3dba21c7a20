// SPDX-License-Identifier: MIT
// The scheduler: one submission and zero new allocations per training step
// after warm-up, plan reuse, memory reuse, in-place update ordering.
#include "cnn.h"
#include "graph.h"
#include "helpers.h"
#include "mlp.h"
#include "vit.h"

using sy::Tensor;

namespace {
struct Step {
  std::shared_ptr<sy::nn::Sequential> model;
  std::unique_ptr<sy::optim::Optimizer> opt;
  Tensor x, y;
  float run() {
    opt->zero_grad();
    Tensor loss = sy::cross_entropy((*model)(x), y);
    loss.backward();
    opt->step();
    return loss.item();
  }
};

Step make_step(sy::BackendDevice& d, bool adam) {
  sy::manual_seed(1);
  Step s;
  s.model = sy::models::mlp({20, 16, 8, 4});
  s.model->to(d);
  if (adam)
    s.opt = std::make_unique<sy::optim::Adam>(s.model->parameters(), 1e-2f);
  else
    s.opt = std::make_unique<sy::optim::SGD>(s.model->parameters(),
                                             sy::optim::SGDOptions{.lr = 0.1f, .momentum = 0.9f});
  std::vector<int32_t> labels(32);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t(i % 4);
  s.x = sy::randn({32, 20}).to(d);
  s.y = sy::from_vector(labels, {32}).to(d);
  return s;
}
}  // namespace

TEST(Scheduler, TrainingStepIsOneSubmissionAndNoAllocationsAfterWarmup) {
  for (bool adam : {true, false}) {
    sy::BackendDevice& d = sy::backend_of(sy::cpu());
    Step s = make_step(d, adam);
    float first = s.run();
    for (int i = 0; i < 3; ++i) s.run();
    auto c0 = d.counters();
    float last = 0;
    for (int i = 0; i < 10; ++i) last = s.run();
    auto c1 = d.counters();
    EXPECT_EQ(c1.submissions - c0.submissions, 10u) << (adam ? "adam" : "sgd");
    EXPECT_EQ(c1.buffer_allocations - c0.buffer_allocations, 0u) << (adam ? "adam" : "sgd");
    EXPECT_EQ(c1.bytes_in_use, c0.bytes_in_use) << "memory stays flat";
    EXPECT_LT(last, first) << "and it trains";
  }
}

TEST_P(OnDevice, CnnAndVitTrainingStepsAreOneSubmissionAndNoAllocationsAfterWarmup) {
  // Convolutions, batch norm (its running statistics update in place),
  // pooling and dropout; attention (transposes, bmm, softmax), LayerNorm and
  // GELU: still one submission and nothing allocated per step.
  for (const char* name : {"cnn", "vit"}) {
    SCOPED_TRACE(name);
    sy::BackendDevice& d = D();
    sy::manual_seed(3);
    auto model = std::string(name) == "cnn" ? std::shared_ptr<sy::nn::Module>(sy::models::cnn())
                                            : std::shared_ptr<sy::nn::Module>(sy::models::vit());
    model->to(d);
    sy::optim::Adam opt(model->parameters(), 1e-3f);
    Tensor x = sy::rand({16, 784}, d), y = sy::randint(0, 10, {16}, d);
    auto step = [&] {
      opt.zero_grad();
      Tensor loss = sy::cross_entropy((*model)(x), y);
      loss.backward();
      opt.step();
      return loss.item();
    };
    float first = step();
    for (int i = 0; i < 3; ++i) step();
    auto c0 = d.counters();
    float last = 0;
    for (int i = 0; i < 5; ++i) last = step();
    auto c1 = d.counters();
    EXPECT_EQ(c1.submissions - c0.submissions, 5u);
    EXPECT_EQ(c1.buffer_allocations - c0.buffer_allocations, 0u);
    EXPECT_EQ(c1.bytes_in_use, c0.bytes_in_use) << "memory stays flat";
    EXPECT_LT(last, first) << "and it trains";
  }
}

TEST(Scheduler, NewBatchesEachStepStillAllocateNothing) {
  sy::BackendDevice& d = sy::backend_of(sy::cpu());
  Step s = make_step(d, true);
  auto xs = random_vec(32 * 20, 5);
  for (int i = 0; i < 4; ++i) {
    s.x = sy::from_vector(xs, {32, 20});
    s.run();
  }
  auto c0 = d.counters();
  for (int i = 0; i < 10; ++i) {
    s.x = sy::from_vector(xs, {32, 20});  // a fresh host batch, as a DataLoader gives
    s.run();
  }
  auto c1 = d.counters();
  EXPECT_EQ(c1.submissions - c0.submissions, 10u);
  EXPECT_EQ(c1.buffer_allocations - c0.buffer_allocations, 0u);
}

TEST(Scheduler, RepeatedStepsReuseTheCachedPlan) {
  sy::BackendDevice& d = sy::backend_of(sy::cpu());
  Step s = make_step(d, true);
  for (int i = 0; i < 3; ++i) s.run();
  auto& ctx = sy::detail::context_of(d);
  size_t plans = ctx.plans.size();
  uint64_t next_id = ctx.next_program_id;
  for (int i = 0; i < 5; ++i) s.run();
  EXPECT_EQ(ctx.plans.size(), plans);
  EXPECT_EQ(ctx.next_program_id, next_id) << "no new program was planned";
}

TEST(Scheduler, IntermediatesShareBuffers) {
  // A chain of 20 elementwise ops on 1 MiB values needs only a couple of
  // temporaries, not 20.
  sy::BackendDevice& d = sy::backend_of(sy::cpu());
  Tensor x = sy::rand({256, 1024});
  x.to_vector<float>();
  d.reset_peak();
  auto base = d.counters().bytes_in_use;
  Tensor y = x;
  for (int i = 0; i < 20; ++i) y = sy::relu(y * 1.01f);
  y = sy::sum(y);
  y.item();
  EXPECT_LE(d.counters().peak_bytes_in_use - base, 3u * 1024 * 1024 + 4096);
}

TEST(Scheduler, UpdatesRunAfterEveryReadOfTheOldValue) {
  Tensor p = sy::from_vector(std::vector<float>{1, 2, 3}, {3}).requires_grad_();
  sy::optim::SGD opt({p}, 0.5f);
  sy::sum(p * p).backward();           // grad = 2p = {2, 4, 6}
  Tensor old_view = p.detach() * 1.f;  // reads p before the update, still pending
  opt.step();                          // p -= 0.5 * grad -> {0, 0, 0}
  Tensor new_view = p * 1.f;           // reads p after the update
  sy::eval({new_view, old_view});      // one program: the old read is ordered first
  EXPECT_EQ(new_view.to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(old_view.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(Scheduler, ReadingAValueOverwrittenByAnUpdateIsAnError) {
  Tensor p = sy::from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
  sy::optim::SGD opt({p}, 0.1f);
  Tensor saved = p.detach();  // the old value
  sy::sum(p * p).backward();
  opt.step();
  sy::synchronize(sy::cpu());  // the update has run
  expect_error([&] { (saved * 2.f).to_vector<float>(); }, {"modified in place", "optimizer"});
}

// The user's Device::synchronize() runs queued graph work, optimizer
// updates included, as synchronize(device) does.
TEST(Scheduler, DeviceSynchronizeRunsQueuedUpdates) {
  Tensor q = sy::from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
  sy::optim::SGD opt({q}, 0.5f);
  sy::sum(q * q).backward();
  sy::eval({q.grad()});
  opt.step();  // queued, not run
  auto& counters = sy::backend_of(sy::cpu()).counters();
  uint64_t before = counters.submissions;
  sy::Device& dev = sy::cpu();
  dev.synchronize();
  EXPECT_EQ(counters.submissions, before + 1) << "the queued update ran";
  dev.synchronize();
  EXPECT_EQ(counters.submissions, before + 1) << "nothing left to run";
  EXPECT_EQ(q.to_vector<float>(), (std::vector<float>{0, 0}));
}

TEST(Scheduler, PendingReadersOfTheOldValueRunBeforeTheUpdate) {
  // As in eager PyTorch, a value computed before step() keeps the old inputs
  // even when only the new parameter is asked for first.
  Tensor q = sy::from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
  sy::optim::SGD opt({q}, 0.5f);
  sy::sum(q * q).backward();
  Tensor old_read = q.detach() * 1.f;
  opt.step();
  EXPECT_EQ((q * 1.f).to_vector<float>(), (std::vector<float>{0, 0}));  // runs the update
  EXPECT_EQ(old_read.to_vector<float>(), (std::vector<float>{1, 2}));
  // Two optimizers over two parameter groups, the loss read at the end.
  Tensor a = sy::from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
  Tensor b = sy::from_vector(std::vector<float>{3}, {1}).requires_grad_();
  sy::optim::SGD oa({a}, 0.1f), ob({b}, 0.1f);
  for (int i = 0; i < 3; ++i) {
    oa.zero_grad(), ob.zero_grad();
    Tensor loss = sy::sum(a * a) * sy::sum(b);
    loss.backward();
    oa.step();
    ob.step();
    EXPECT_TRUE(std::isfinite(loss.item()));
  }
  // Still one submission per step with two optimizers.
  auto c0 = sy::backend_of(sy::cpu()).counters().submissions;
  oa.zero_grad(), ob.zero_grad();
  Tensor loss = sy::sum(a * a) * sy::sum(b);
  loss.backward();
  oa.step();
  ob.step();
  loss.item();
  EXPECT_EQ(sy::backend_of(sy::cpu()).counters().submissions - c0, 1u);
}

TEST(Scheduler, AFailedRunLeavesTheDeviceUsable) {
  Tensor logits = sy::randn({4, 10});
  Tensor bad = sy::from_vector(std::vector<int32_t>{1, 2, 12, 3}, {4});
  expect_error([&] { sy::cross_entropy(logits, bad).item(); },
               {"[cross_entropy]", "labels in [0, 10)", "found 12"});
  Tensor good = sy::from_vector(std::vector<int32_t>{1, 2, 3, 4}, {4});
  EXPECT_TRUE(std::isfinite(sy::cross_entropy(logits, good).item()));
}

TEST(Scheduler, StepsWithoutReadsStayBounded) {
  // Without loss.item(), each optimizer step runs the previous one, so the
  // pending graph never grows past one step.
  sy::BackendDevice& d = sy::backend_of(sy::cpu());
  Step s = make_step(d, true);
  auto step_without_read = [&] {
    s.opt->zero_grad();
    sy::cross_entropy((*s.model)(s.x), s.y).backward();
    s.opt->step();
  };
  for (int i = 0; i < 3; ++i) step_without_read();
  auto c0 = d.counters();
  for (int i = 0; i < 20; ++i) step_without_read();
  EXPECT_EQ(d.counters().submissions - c0.submissions, 20u);
  EXPECT_LE(sy::detail::context_of(d).pending_updates.size(), 2u * s.model->parameters().size());
  EXPECT_EQ(d.counters().buffer_allocations - c0.buffer_allocations, 0u);
  sy::synchronize(d);
  EXPECT_TRUE(sy::detail::context_of(d).pending_updates.empty());
}

TEST(Scheduler, BackwardWithoutReadsHoldsBoundedMemory) {
  // Gradient accumulation: backward() again and again with no read and no
  // step. Each backward adds to .grad lazily; once the pending graph passes
  // Context::kFlushOps the queued gradients run, so memory stops growing.
  sy::BackendDevice& d = sy::backend_of(sy::cpu());
  Step s = make_step(d, true);
  s.opt->zero_grad();
  sy::cross_entropy((*s.model)(s.x), s.y).backward();
  std::vector<std::vector<float>> one;
  for (auto& p : s.model->parameters()) one.push_back(p.grad().to_vector<float>());
  s.opt->zero_grad();
  const int n = 900;
  size_t peak_middle = 0, peak_last = 0;
  for (int i = 0; i < n; ++i) {
    sy::cross_entropy((*s.model)(s.x), s.y).backward();
    if (i >= n / 3) {
      size_t& peak = i < 2 * n / 3 ? peak_middle : peak_last;
      peak = std::max(peak, size_t(d.counters().bytes_in_use));
    }
  }
  // The first flushes allocate the gradients (and the buffers their sums
  // alternate between); after that, device memory's peak stays put.
  EXPECT_LE(peak_last, peak_middle);
  // The pending graph itself (host memory) is bounded too: before, all 600
  // calls' graphs waited for the first read.
  EXPECT_LT(sy::detail::context_of(d).ops_since_eval, 2 * sy::detail::Context::kFlushOps);
  EXPECT_LT(sy::detail::context_of(d).pending_values.size(), 1000u);
  auto params = s.model->parameters();
  for (size_t j = 0; j < params.size(); ++j) {
    auto g = params[j].grad().to_vector<float>();
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_NEAR(g[i], n * one[j][i], 1e-3f * (1.f + std::abs(n * one[j][i])))
          << "parameter " << j << ", element " << i;
  }
}

TEST(Scheduler, AGraphThatIsNeverEvaluatedIsCappedWithAClearError) {
  // The limit is process-wide and counts op nodes alive and not yet run;
  // set it to 1000 above what other tests left, and restore it whatever
  // happens.
  struct Limit {
    int64_t saved = sy::detail::g_max_pending_ops.load();
    ~Limit() { sy::detail::g_max_pending_ops = saved; }
  } limit;
  const int64_t base = sy::detail::g_pending_ops.load();
  sy::detail::g_max_pending_ops = base + 1000;
  {
    Tensor dropped = sy::ones({4});
    for (int i = 0; i < 900; ++i) dropped = dropped + 1.f;
  }  // never run, but dropped: it no longer counts
  EXPECT_EQ(sy::detail::g_pending_ops.load(), base);
  Tensor t = sy::ones({4});
  int made = 0;
  try {
    for (; made < 5000; ++made) t = t + 1.f;
    ADD_FAILURE() << "5000 unevaluated ops were accepted with a limit of 1000";
  } catch (const sy::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("expected at most " + std::to_string(base + 1000) + " operations waiting"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("never evaluated"), std::string::npos) << m;
  }
  EXPECT_EQ(made, 999);  // ones() is the first of the 1000
  // Nothing is lost: reading the value runs what was recorded, which leaves
  // the count, and the device accepts new work.
  EXPECT_FLOAT_EQ(t.to_vector<float>()[0], float(made + 1));
  EXPECT_EQ(sy::detail::g_pending_ops.load(), base);
  EXPECT_FLOAT_EQ((t + 1.f).to_vector<float>()[0], float(made + 2));
}

TEST(Scheduler, BackwardThroughValuesAnUpdateOverwroteFailsAtOnceAndNothingIsStuck) {
  Tensor w = sy::from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
  sy::optim::SGD opt({w}, 0.1f);
  Tensor loss = sy::sum(w * w);
  loss.backward({}, /*retain_graph=*/true);
  opt.step();
  loss.item();  // runs the update: w is now at version 1
  // The saved forward values read w at version 0: PyTorch's "modified by an
  // inplace operation" error, raised at backward(), not later.
  expect_error([&] { loss.backward(); }, {"modified in place", "optimizer"});
  EXPECT_FLOAT_EQ(sy::sum(sy::ones({3})).item(), 3.f) << "the device still works";
  opt.zero_grad();
  sy::sum(w * w).backward();
  opt.step();
  EXPECT_TRUE(std::isfinite(sy::sum(w).item()));
}

TEST(Scheduler, AFailedStepIsDiscardedAndTrainingGoesOn) {
  sy::BackendDevice& d = sy::backend_of(sy::cpu());
  Step s = make_step(d, true);
  s.run();
  Tensor bad = sy::from_vector(std::vector<int32_t>(32, 9), {32});  // 9 >= 4 classes
  s.opt->zero_grad();
  Tensor loss = sy::cross_entropy((*s.model)(s.x), bad);
  loss.backward();
  s.opt->step();
  expect_error([&] { loss.item(); }, {"[cross_entropy]", "labels in [0, 4)", "found 9"});
  expect_error([&] { loss.item(); }, {"discarded by a failed evaluation"});
  float l = s.run();  // the next good step works
  EXPECT_TRUE(std::isfinite(l));
}

TEST(Scheduler, ReadsThroughAViewOfAParameterKeepTheOldValue) {
  Tensor w = sy::uniform({4}, -1.f, 1.f).requires_grad_();
  Tensor wv = w.reshape({2, 2});  // a pending view of a pending value
  sy::eval({w});                  // w is now a leaf; wv still a view node
  auto before = w.to_vector<float>();
  Tensor y = wv * 2.f;
  w.set_grad(sy::ones({4}));
  sy::optim::SGD opt({w}, 1.f);
  opt.step();
  Tensor after = w * 1.f;
  sy::eval({after, y});
  auto yv = y.to_vector<float>();
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(yv[i], 2.f * before[i]);
  auto av = after.to_vector<float>();
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(av[i], before[i] - 1.f);
}

TEST(Scheduler, InPlaceUpdateOfASliceIsRefused) {
  Tensor flat = sy::zeros({10});
  Tensor part = flat.slice(0, 4).requires_grad_();
  part.set_grad(sy::ones({4}));
  sy::optim::SGD opt({part}, 0.1f);
  expect_error([&] { opt.step(); }, {"owns its whole storage", "offset 0 into 40 bytes"});
}

TEST(Scheduler, VeryLongGraphsEvaluateAndFreeWithoutRecursion) {
  Tensor t = sy::ones({1});
  for (int i = 0; i < 100000; ++i) t = t + 1.f;
  EXPECT_FLOAT_EQ(t.item(), 100001.f);
  {
    Tensor x = sy::ones({1}).requires_grad_();
    Tensor u = x;
    for (int i = 0; i < 100000; ++i) u = u * 1.0f;
  }  // dropped unevaluated: graph and autograd chain freed iteratively
  SUCCEED();
}

TEST(Scheduler, TestsRunWithPoisonedBuffers) {
  if (!std::getenv("SWITCHYARD_POISON"))
    GTEST_SKIP() << "run through ctest, which sets SWITCHYARD_POISON=1";
  auto& pool = sy::detail::context_of(sy::cpu()).pool;
  sy::Buffer b = pool.acquire(64);
  auto* bytes = static_cast<unsigned char*>(sy::backend_of(sy::cpu()).host_pointer(b));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(bytes[i], 0xff);
  pool.release(b);
  // An op's output starts as NaN and every element is overwritten.
  auto v = (sy::zeros({1000}) + 1.f).to_vector<float>();
  for (float x : v) ASSERT_EQ(x, 1.f);
}

INSTANTIATE_TEST_SUITE_P(Devices, OnDevice, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& i) { return device_param_name(i.param); });
