// SPDX-License-Identifier: MIT
// nn::DataParallel: one model over several devices in one process matches
// training on one device with the whole batch (gradients within 1e-5
// relative, 50 steps' losses within 1e-4), over two CPU-backed devices and
// over the CPU beside Vulkan; the devices run at once; a measured balance
// gives a slow device fewer rows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "helpers.h"
#include "mlp.h"
#include "switchyard/parallel.h"

using sy::Tensor;

namespace {

// Real data: the first `n` Fashion-MNIST training samples.
sy::data::Batch fashion(int64_t n) {
  static auto ds =
      std::make_shared<sy::data::FashionMNIST>(sy::data::FashionMNIST::kDefaultDir, true, 4096);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = i % ds->size();
  return ds->get_batch(idx);
}

std::shared_ptr<sy::nn::Sequential> model(uint64_t seed) {
  sy::manual_seed(seed);
  return sy::models::mlp({784, 64, 32, 10});
}

// One step's gradients and 50 steps' losses (Adam, batch `batch` of real
// data, the batch moving through the data set), on one device or over
// several with DataParallel.
struct Trained {
  std::vector<std::vector<float>> grads;
  std::vector<float> losses;
};
Trained train(const std::vector<std::string>& devices, int64_t batch, int steps = 50,
              sy::nn::DataParallelOptions o = {}, sy::DType precision = sy::DType::f32) {
  auto m = model(7);
  std::shared_ptr<sy::nn::Module> net = m;
  sy::Device* out_dev = &sy::device(devices[0]);
  if (devices.size() > 1) {
    auto dp = std::make_shared<sy::nn::DataParallel>(m, devices, o);
    out_dev = &dp->output_device();
    net = dp;
  } else {
    m->to(*out_dev);
  }
  sy::optim::Adam opt(net->parameters(), 1e-3f);
  sy::data::Batch all = fashion(batch * steps);
  Trained r;
  for (int s = 0; s < steps; ++s) {
    Tensor x = all.data.slice(s * batch, (s + 1) * batch);
    Tensor y = all.target.slice(s * batch, (s + 1) * batch).to(*out_dev);
    opt.zero_grad();
    Tensor loss;
    {
      sy::autocast guard(precision, precision != sy::DType::f32);
      loss = sy::cross_entropy((*net)(x), y);
    }
    loss.backward();
    if (s == 0)
      for (const Tensor& p : net->parameters()) r.grads.push_back(p.grad().to_vector<float>());
    opt.step();
    r.losses.push_back(loss.item());
  }
  return r;
}

void expect_matches(const Trained& dp, const Trained& one, double loss_tol) {
  ASSERT_EQ(dp.grads.size(), one.grads.size());
  for (size_t i = 0; i < one.grads.size(); ++i)
    EXPECT_LE(max_rel(dp.grads[i], one.grads[i]), 1e-5) << "parameter " << i;
  ASSERT_EQ(dp.losses.size(), one.losses.size());
  for (size_t s = 0; s < one.losses.size(); ++s)
    EXPECT_NEAR(dp.losses[s], one.losses[s], loss_tol) << "step " << s;
}

}  // namespace

TEST(DataParallel, TwoCpuDevicesMatchOneDeviceWithTheWholeBatch) {
  mock_device();
  const Trained one = train({"cpu"}, 64);
  expect_matches(train({"cpu", "mock:0"}, 64), one, 1e-4);
  // An odd batch: 33 and 32 rows.
  expect_matches(train({"mock:0", "cpu"}, 65, 5), train({"cpu"}, 65, 5), 1e-4);
}

// Under autocast the replicas' forwards are recorded on the caller's thread,
// inside its scope: every replica runs its GEMMs in bf16, the master
// weights and their gradients stay f32, and the losses follow one device's
// bf16 run (within bf16's rounding of differently split products), not the
// f32 run's.
TEST(DataParallel, AutocastRunsEveryReplicaInItsDtype) {
  mock_device();
  const Trained f32 = train({"cpu"}, 64, 12);
  const Trained one = train({"cpu"}, 64, 12, {}, sy::bf16);
  std::vector<std::string> devs = {"cpu", "mock:0"};
  if (unavailable_reason("vulkan:0").empty()) devs.push_back("vulkan:0");
  const Trained dp = train(devs, 64, 12, {}, sy::bf16);
  ASSERT_EQ(dp.losses.size(), one.losses.size());
  double off_f32 = 0;
  for (size_t s = 0; s < one.losses.size(); ++s) {
    EXPECT_NEAR(dp.losses[s], one.losses[s], 2e-2 * std::abs(one.losses[s])) << "step " << s;
    off_f32 = std::max(off_f32, double(std::abs(one.losses[s] - f32.losses[s])));
  }
  EXPECT_GT(off_f32, 1e-4) << "bf16 losses equal to f32's: autocast did not take effect";
  ASSERT_EQ(dp.grads.size(), one.grads.size());
  for (size_t i = 0; i < one.grads.size(); ++i)
    EXPECT_LE(max_rel(dp.grads[i], one.grads[i]), 5e-2) << "parameter " << i;
}

TEST(DataParallel, CpuBesideVulkanMatchesOneDevice) {
  SKIP_UNLESS_AVAILABLE("vulkan:0");
  sy::backend_device("vulkan:0").reset_peak();
  const uint64_t messages = sy::backend_device("vulkan:0").counters().validation_messages;
  const Trained one = train({"cpu"}, 64);
  expect_matches(train({"cpu", "vulkan:0"}, 64), one, 1e-4);
  expect_matches(train({"vulkan:0", "cpu"}, 64), one, 1e-4);
  EXPECT_EQ(sy::backend_device("vulkan:0").counters().validation_messages, messages);
}

TEST(DataParallel, GatheredOutputAndInputGradientMatchOneDevice) {
  mock_device();
  auto m = model(3);
  sy::data::Batch b = fashion(9);
  Tensor x1 = b.data.detach().requires_grad_();
  Tensor ref = (*m)(x1);
  sy::sum(ref).backward();
  const auto ref_x = x1.grad().to_vector<float>();
  m->zero_grad();

  sy::nn::DataParallel dp(m, {"cpu", "mock:0"});
  EXPECT_EQ(dp.shard_sizes(9), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(dp.shard_sizes(1), (std::vector<int64_t>{1, 0})) << "a device may get no rows";
  Tensor x2 = b.data.detach().requires_grad_();
  Tensor out = dp(x2);
  EXPECT_EQ(&out.device(), &sy::cpu());
  EXPECT_LE(max_rel(out.to_vector<float>(), ref.to_vector<float>()), 1e-6);
  sy::sum(out).backward();
  EXPECT_LE(max_rel(x2.grad().to_vector<float>(), ref_x), 1e-6);
  // One row on two devices: the second sits out.
  EXPECT_EQ(dp(b.data.slice(0, 1)).shape(), (sy::Shape{1, 10}));
  auto names = names_of(dp.state_dict());
  EXPECT_EQ(names.front(), "module.0.weight") << "PyTorch's DataParallel names";
}

TEST(DataParallel, BadArgumentsAreClearErrors) {
  mock_device();
  auto m = model(1);
  expect_error(
      [&] {
        sy::nn::DataParallel(m, {"cpu", "cpu"});
      },
      {"[DataParallel]", "each device once", "cpu twice"});
  expect_error([&] { sy::nn::DataParallel(m, {"cpu", "nosuch:0"}); }, {"nosuch"});
  expect_error([&] { sy::nn::DataParallel(nullptr, {"cpu"}); }, {"[DataParallel]", "null"});
  struct NoSpec : sy::nn::Module {
    Tensor forward(const Tensor& x) override { return x; }
  };
  expect_error(
      [&] {
        sy::nn::DataParallel(std::make_shared<NoSpec>(), {"cpu", "mock:0"});
      },
      {"[DataParallel]", "spec()", "replicate"});
  sy::nn::DataParallel dp(m, {"cpu", "mock:0"});
  expect_error([&] { (void)dp(sy::full({}, 1.f)); }, {"[DataParallel]", "batch dimension"});
}

// A CPU device whose every Program takes `delay` longer, logging when each
// ran: a slow GPU, to show the devices run at once and the measured split.
namespace {
class SlowDevice final : public CpuDouble {
 public:
  SlowDevice(const std::string& name, std::chrono::milliseconds delay)
      : CpuDouble(name, name + " CPU double"), delay_(delay) {}
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> runs() {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_;
  }

 private:
  void execute_impl(const sy::Program& p, std::span<const sy::Binding> b) override {
    auto t0 = Clock::now();
    std::this_thread::sleep_for(delay_);
    cpu_.execute(p, b);
    std::lock_guard<std::mutex> lock(mu_);
    runs_.push_back({t0, Clock::now()});
  }

  std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> runs_;
};

SlowDevice& slow_device(const std::string& name, int ms) {
  static std::map<std::string, SlowDevice*> made;
  if (!made.count(name)) {
    auto d = std::make_shared<SlowDevice>(name, std::chrono::milliseconds(ms));
    made[name] = d.get();
    sy::register_backend({name, true, "", {d}});
  }
  return *made[name];
}
}  // namespace

TEST(DataParallel, EveryDeviceRunsBeforeAnyIsWaitedOn) {
  SlowDevice& a = slow_device("slowa", 150);
  SlowDevice& b = slow_device("slowb", 150);
  auto m = model(2);
  sy::nn::DataParallel dp(m, {"slowa:0", "slowb:0"});
  sy::data::Batch batch = fashion(16);
  Tensor y = batch.target.to(dp.output_device());
  Tensor loss = sy::cross_entropy(dp(batch.data), y);
  loss.backward();
  // Forward and backward: each of b's Programs overlaps one of a's (which
  // also runs the loss's backward, on its own).
  auto ra = a.runs(), rb = b.runs();
  ASSERT_GE(rb.size(), 2u);
  for (size_t i = 0; i < rb.size(); ++i)
    EXPECT_TRUE(
        std::any_of(ra.begin(), ra.end(),
                    [&](auto& r) { return r.first < rb[i].second && rb[i].first < r.second; }))
        << "run " << i << " of the second device overlapped none of the first's";
}

TEST(DataParallel, MeasuredBalanceGivesASlowDeviceFewerRows) {
  slow_device("slowc", 60);
  auto m = model(4);
  sy::nn::DataParallelOptions o;
  o.balance = sy::nn::DataParallelOptions::Balance::measured;
  o.measure_steps = 2;
  sy::nn::DataParallel dp(m, {"cpu", "slowc:0"}, o);
  EXPECT_EQ(dp.shard_sizes(64), (std::vector<int64_t>{32, 32})) << "equal until measured";
  sy::optim::SGD opt(dp.parameters(), 0.01f);
  sy::data::Batch batch = fashion(64);
  for (int s = 0; s < 4; ++s) {
    opt.zero_grad();
    Tensor loss = sy::cross_entropy(dp(batch.data), batch.target);
    loss.backward();
    opt.step();
    (void)loss.item();
  }
  auto st = dp.stats();
  ASSERT_EQ(st.speed.size(), 2u);
  EXPECT_GT(st.speed[0], 2 * st.speed[1]) << "the CPU is measured faster than the slow double";
  auto split = dp.shard_sizes(64);
  EXPECT_EQ(split[0] + split[1], 64);
  EXPECT_GT(split[0], 40) << "the faster device gets the larger share";
  EXPECT_EQ(st.shard, split) << "the last step ran with the measured split";
  EXPECT_EQ(st.steps, 4);
  EXPECT_GT(st.bytes_moved, 0u);
}

// Gradients accumulate across backward passes without zero_grad, as on one
// device; frozen parameters get none, on any replica.
TEST(DataParallel, AccumulationAndFrozenParametersAsOnOneDevice) {
  mock_device();
  sy::data::Batch b = fashion(10);
  auto ref = model(5);
  auto m = model(5);
  sy::nn::DataParallel dp(m, {"cpu", "mock:0"});
  ref->parameters()[0].requires_grad_(false);
  m->parameters()[0].requires_grad_(false);
  for (int pass = 0; pass < 2; ++pass) {  // no zero_grad between them
    sy::cross_entropy((*ref)(b.data), b.target).backward();
    sy::cross_entropy(dp(b.data), b.target).backward();
  }
  auto pr = ref->parameters(), pd = dp.parameters();
  EXPECT_FALSE(pd[0].grad().defined()) << "a frozen parameter";
  for (size_t i = 1; i < pr.size(); ++i)
    EXPECT_LE(max_rel(pd[i].grad().to_vector<float>(), pr[i].grad().to_vector<float>()), 1e-5)
        << "parameter " << i << ", two passes accumulated";
  Tensor out = dp(b.data);
  Tensor loss = sy::cross_entropy(out, b.target);
  loss.backward(Tensor(), /*retain_graph=*/true);
  expect_error([&] { loss.backward(); }, {"[backward]", "second time"});
}

// A copy to a replica that fails (an injected upload fault on the second
// device) leaves no replica half updated: the next forward copies again.
TEST(DataParallel, AFailedCopyToAReplicaIsRetriedNotForgotten) {
  sy::BackendDevice& mock = mock_device();
  sy::data::Batch b = fashion(8);
  auto m = model(6);
  sy::nn::DataParallel dp(m, {"cpu", "mock:0"});
  sy::optim::SGD opt(dp.parameters(), 0.5f);
  sy::cross_entropy(dp(b.data), b.target).backward();
  opt.step();  // the model changes: the next forward copies it
  mock.inject_fault(sy::FaultOp::upload, 2);
  expect_error([&] { (void)dp(b.data); }, {"injected"});
  Tensor got = dp(b.data);
  Tensor want = (*m)(b.data);  // the model itself, on the cpu
  EXPECT_LE(max_rel(got.to_vector<float>(), want.to_vector<float>()), 1e-6)
      << "the replica on mock:0 runs the stepped values";
}

#ifdef SWITCHYARD_TEST_CUDA_EMU
// Three backends in one model: the CUDA backend (on the host emulation of
// the CUDA runtime: device memory the host cannot map, so its copies to the
// CPU download into zero-copy memory), Vulkan (lavapipe, under validation)
// and the CPU, against one device with the whole batch.
TEST(DataParallel, CudaBesideVulkanAndTheCpuMatchesOneDevice) {
  SKIP_UNLESS_AVAILABLE("vulkan:0");
  const std::string cuda = cuda_test_device();
  expect_matches(train({"cpu", cuda, "vulkan:0"}, 66, 20), train({"cpu"}, 66, 20), 1e-4);
  expect_matches(train({cuda, "cpu"}, 64, 10), train({"cpu"}, 64, 10), 1e-4);
}
#endif
