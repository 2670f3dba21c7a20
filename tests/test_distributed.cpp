// SPDX-License-Identifier: MIT
// Distributed training over MPI, run by ctest under mpirun (-np 2 and -np 3):
// the collectives, the sampler's shares, and DistributedDataParallel against
// one process training on the whole batch (which every rank also runs, as
// the reference): gradients within 1e-5 relative, 50 steps' losses within
// 1e-4. Every rank runs every test in the same order, as collectives need.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "helpers.h"
#include "mlp.h"
#include "switchyard/distributed.h"

using sy::Tensor;
namespace dist = sy::distributed;

namespace {
class Group : public ::testing::Environment {
 public:
  void SetUp() override { dist::init_process_group("mpi"); }
  void TearDown() override { dist::destroy_process_group(); }
};
[[maybe_unused]] ::testing::Environment* const group_env =
    ::testing::AddGlobalTestEnvironment(new Group);

}  // namespace

TEST(Distributed, TheGroupComesFromTheLauncher) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  const char* np = std::getenv("SWITCHYARD_TEST_WORLD");
  ASSERT_NE(np, nullptr) << "ctest sets SWITCHYARD_TEST_WORLD to mpirun's -np";
  EXPECT_EQ(world, std::atoi(np));
  EXPECT_GE(rank, 0);
  EXPECT_LT(rank, world);
  EXPECT_EQ(dist::get_local_rank(), rank) << "one machine: local ranks are the ranks";
  expect_error([] { dist::init_process_group("mpi"); }, {"[init_process_group]", "already"});
  expect_error([] { dist::init_process_group("nccl"); }, {"[init_process_group]", "\"mpi\""});
}

TEST(Distributed, AllReduceBroadcastAndBarrier) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  Tensor t = sy::full({3}, float(rank + 1));
  const Tensor before = t;
  dist::all_reduce(t);
  const float sum = float(world * (world + 1) / 2);
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(3, sum));
  EXPECT_EQ(before.to_vector<float>(), t.to_vector<float>()) << "in place: the same tensor";
  Tensor a = sy::full({2}, float(rank));
  dist::all_reduce(a, dist::ReduceOp::avg);
  EXPECT_FLOAT_EQ(a.to_vector<float>()[0], float(world - 1) / 2);
  Tensor m = sy::full({1}, float(rank * 10));
  dist::all_reduce(m, dist::ReduceOp::max);
  EXPECT_EQ(m.item(), float((world - 1) * 10));
  // max: a NaN on any rank wins, wherever it sits in the ring.
  Tensor with_nan = sy::from_vector(
      std::vector<float>{rank == 0 ? NAN : 1.f, rank == world - 1 ? NAN : 2.f, float(rank)}, {3});
  dist::all_reduce(with_nan, dist::ReduceOp::max);
  const auto wn = with_nan.to_vector<float>();
  EXPECT_TRUE(std::isnan(wn[0]) && std::isnan(wn[1])) << wn[0] << " " << wn[1];
  EXPECT_EQ(wn[2], float(world - 1));
  // Longer than the ranks and not a multiple of them: every rank's chunk of
  // the ring, element by element (small integers: the sums are exact).
  const size_t n = 1001;
  std::vector<float> v(n), w(n), want_sum(n, 0.f), want_max(n, -1.f);
  for (size_t i = 0; i < n; ++i) {
    v[i] = float(i % 97) * float(rank + 1) - float(rank);
    w[i] = float((i * 7 + size_t(rank) * 13) % 101);
    for (int r = 0; r < world; ++r) {
      want_sum[i] += float(i % 97) * float(r + 1) - float(r);
      want_max[i] = std::max(want_max[i], float((i * 7 + size_t(r) * 13) % 101));
    }
  }
  Tensor vs = sy::from_vector(v, {int64_t(n)}), ws = sy::from_vector(w, {int64_t(n)});
  dist::all_reduce(vs);
  dist::all_reduce(ws, dist::ReduceOp::max);
  EXPECT_EQ(vs.to_vector<float>(), want_sum);
  EXPECT_EQ(ws.to_vector<float>(), want_max);
  Tensor b = sy::full({4}, float(rank + 100));
  dist::broadcast(b, world - 1);
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>(4, float(world + 99)));
  dist::barrier();
  expect_error([&] { dist::broadcast(b, world); }, {"[broadcast]", "source rank"});
  Tensor i = sy::full({1}, 1.f).to(sy::DType::i32);
  expect_error([&] { dist::all_reduce(i); }, {"[all_reduce]", "f32"});
  auto st = dist::comm_stats();
  EXPECT_GE(st.calls, 5);
  EXPECT_GT(st.bytes, 0u);
}

// Every row of every batch on exactly one rank; the shuffle shared.
TEST(Distributed, TheSamplerGivesEachRankItsShareOfEveryBatch) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  const int64_t n = 23, batch = 8;
  std::vector<float> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = float(i);
  auto ds = std::make_shared<sy::data::TensorDataset>(sy::from_vector(ids, {n, 1}),
                                                      sy::from_vector(ids, {n}));
  sy::data::DataLoader mine(ds, {.batch_size = batch,
                                 .shuffle = true,
                                 .seed = 5,
                                 .sampler = {.num_replicas = world, .rank = rank}});
  sy::data::DataLoader whole(ds, {.batch_size = batch, .shuffle = true, .seed = 5});
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<float> seen(size_t(n), 0.f);
    int64_t steps = 0;
    auto whole_it = whole.begin();
    for (const auto& b : mine) {
      auto v = b.target.to_vector<float>();
      EXPECT_GE(v.size(), 1u) << "every rank has rows in every step";
      const int64_t global = whole_it->target.numel();
      EXPECT_LE(std::abs(int64_t(v.size()) - global / world), 1) << "shares differ by <= 1";
      for (float f : v) seen[size_t(f)] += 1.f;
      ++whole_it;
      ++steps;
    }
    EXPECT_EQ(steps, mine.num_batches());
    Tensor s = sy::from_vector(seen, {n});
    dist::all_reduce(s);
    auto total = s.to_vector<float>();
    // The last batch (23 % 8 = 7 rows) is kept when it has a row per rank.
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(total[size_t(i)], 1.f) << "sample " << i << " in epoch " << epoch;
  }
}

// DDP with each rank's share of a 64-row batch (-np 3: 22, 21, 21 rows)
// trains as one process with the whole batch.
TEST(Distributed, DdpTrainsAsOneProcessWithTheWholeBatch) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  const int64_t batch = 64;
  const int steps = 50;
  auto ds = std::make_shared<sy::data::FashionMNIST>(sy::data::FashionMNIST::kDefaultDir, true,
                                                     batch * steps);
  auto make = [](uint64_t seed) {
    sy::manual_seed(seed);
    return sy::models::mlp({784, 64, 32, 10});
  };
  auto ref = make(11);
  // Another seed on ranks > 0: the constructor's broadcast must fix it.
  auto local = make(rank == 0 ? 11 : 12 + uint64_t(rank));
  auto ddp = std::make_shared<sy::nn::DistributedDataParallel>(local);
  sy::optim::Adam opt_ref(ref->parameters(), 1e-3f), opt(ddp->parameters(), 1e-3f);
  sy::data::DataLoader whole(ds, {.batch_size = batch, .shuffle = true, .seed = 3});
  sy::data::DataLoader mine(ds, {.batch_size = batch,
                                 .shuffle = true,
                                 .seed = 3,
                                 .sampler = {.num_replicas = world, .rank = rank}});
  auto it_ref = whole.begin();
  int s = 0;
  for (const auto& b : mine) {
    const auto& w = *it_ref;
    opt_ref.zero_grad();
    Tensor loss_ref = sy::cross_entropy((*ref)(w.data), w.target);
    loss_ref.backward();
    opt.zero_grad();
    Tensor loss = sy::cross_entropy((*ddp)(b.data), b.target);
    loss.backward();
    EXPECT_EQ(ddp->global_batch(), w.data.size(0));
    if (s == 0) {
      auto pr = ref->parameters(), pd = ddp->parameters();
      for (size_t i = 0; i < pr.size(); ++i)
        EXPECT_LE(max_rel(pd[i].grad().to_vector<float>(), pr[i].grad().to_vector<float>()), 1e-5)
            << "parameter " << i << " on rank " << rank;
    }
    opt_ref.step();
    opt.step();
    // The global batch's loss: each rank's mean weighted by its rows.
    Tensor pair = sy::from_vector(
        std::vector<float>{loss.item() * float(b.data.size(0)), float(b.data.size(0))}, {2});
    dist::all_reduce(pair);
    auto v = pair.to_vector<float>();
    EXPECT_NEAR(v[0] / v[1], loss_ref.item(), 1e-4) << "step " << s;
    ++it_ref;
    ++s;
  }
  EXPECT_EQ(s, steps);
  // Every rank holds the same parameters, bit for bit: the ring gives every
  // rank the same sums, so the same gradients and the same steps.
  for (Tensor p : ddp->parameters()) {
    Tensor hi = p.detach() * 1.f, lo = p.detach() * -1.f;
    dist::all_reduce(hi, dist::ReduceOp::max);
    dist::all_reduce(lo, dist::ReduceOp::max);
    EXPECT_EQ(hi.to_vector<float>(), (lo * -1.f).to_vector<float>());
  }
}

// Gradients accumulate across backward passes without zero_grad, frozen
// parameters get none, and the input's gradient comes back, as in one
// process (every rank checks its own rows against the whole batch's).
TEST(Distributed, DdpAccumulationFrozenParametersAndInputGradients) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  const int64_t n = 12, q = n / world, extra = n % world;
  const int64_t lo = rank * q + std::min<int64_t>(rank, extra), hi = lo + q + (rank < extra);
  auto ds = std::make_shared<sy::data::FashionMNIST>(sy::data::FashionMNIST::kDefaultDir, true, n);
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[size_t(i)] = i;
  sy::data::Batch b = ds->get_batch(all);
  auto make = [] {
    sy::manual_seed(21);
    return sy::models::mlp({784, 16, 10});
  };
  auto ref = make(), local = make();
  ref->parameters()[0].requires_grad_(false);
  local->parameters()[0].requires_grad_(false);
  // A bucket per parameter: several rings in flight at once, the counts in
  // the first.
  sy::nn::DistributedDataParallel ddp(local, {.bucket_cap_mb = 1e-6});
  Tensor x_ref, x_mine;
  for (int pass = 0; pass < 2; ++pass) {  // no zero_grad between them
    x_ref = b.data.detach().requires_grad_();
    sy::cross_entropy((*ref)(x_ref), b.target).backward();
    x_mine = b.data.slice(lo, hi).detach().requires_grad_();
    sy::cross_entropy(ddp(x_mine), b.target.slice(lo, hi)).backward();
  }
  auto pr = ref->parameters(), pd = ddp.parameters();
  EXPECT_EQ(ddp.buckets(), int64_t(pr.size()) - 1) << "a bucket per trainable parameter";
  EXPECT_FALSE(pd[0].grad().defined()) << "a frozen parameter";
  for (size_t i = 1; i < pr.size(); ++i)
    EXPECT_LE(max_rel(pd[i].grad().to_vector<float>(), pr[i].grad().to_vector<float>()), 1e-5)
        << "parameter " << i << ", two passes accumulated";
  // The input's gradient is this rank's loss's (a mean over its rows).
  Tensor want = x_ref.grad().slice(lo, hi) * (float(n) / float(hi - lo));
  EXPECT_LE(max_rel(x_mine.grad().to_vector<float>(), want.to_vector<float>()), 1e-5);
  // Frozen after a backward: it keeps the gradient it has.
  const auto kept = pd[1].grad().to_vector<float>();
  pd[1].requires_grad_(false);
  sy::cross_entropy(ddp(b.data.slice(lo, hi)), b.target.slice(lo, hi)).backward();
  EXPECT_EQ(pd[1].grad().to_vector<float>(), kept);
  Tensor loss = sy::cross_entropy(ddp(x_mine.detach()), b.target.slice(lo, hi));
  loss.backward(Tensor(), /*retain_graph=*/true);
  expect_error([&] { loss.backward(); }, {"[backward]", "second time"});
}

// Run alone (ctest distributed:timeout, SWITCHYARD_DIST_TIMEOUT_S=2): rank 0
// never joins; rank 1's collective fails with a clear error within the
// timeout instead of hanging, and it ends the job.
TEST(DistributedTimeout, AMissingRankIsAnErrorNotAHang) {
  ASSERT_EQ(dist::get_world_size(), 2);
  if (dist::get_rank() == 0) {
    std::this_thread::sleep_for(std::chrono::seconds(20));  // ended by rank 1's abort first
    return;
  }
  Tensor t = sy::ones({4});
  const auto t0 = std::chrono::steady_clock::now();
  try {
    dist::all_reduce(t);
    ADD_FAILURE() << "all_reduce returned without rank 0";
  } catch (const sy::Error& e) {
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(took, 1.5);
    EXPECT_LE(took, 10.0);
    std::printf("timeout error after %.1f s: %s\n", took, e.what());
    expect_error([&] { dist::barrier(); }, {"[barrier]", "unusable", "died or hung"});
  }
  std::fflush(stdout);
  dist::abort_group(3);
}
