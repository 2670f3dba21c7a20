// SPDX-License-Identifier: MIT
// Fault injection: every call of the device contract that a training run
// makes (allocate, upload, download, copy, execute, synchronize) is made to
// fail in turn. Each failure must be a clear exception (or be absorbed, as
// the buffer cache absorbs a failed allocation by retrying), leave no buffer
// behind, hang nothing, and the next run on the device must compute exactly
// what a run that never failed computes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "graph.h"
#include "helpers.h"
#ifdef SWITCHYARD_TEST_VK_FAULTS
#include "vk_loader.h"
#endif

namespace {

constexpr int64_t kIn = 12, kClasses = 3, kBatch = 16;

// A cold start and two steps of a small model, from a fixed seed: builds,
// uploads, allocates, executes and reads back. Returns the losses.
std::vector<float> short_run(sy::Device& d) {
  sy::manual_seed(3);
  auto model = std::make_shared<sy::nn::Sequential>();
  model->add(std::make_shared<sy::nn::Linear>(kIn, 24))
      .add(std::make_shared<sy::nn::ReLU>())
      .add(std::make_shared<sy::nn::Linear>(24, kClasses));
  model->to(d);
  sy::optim::Adam opt(model->parameters(), 1e-2f);
  auto xs = random_vec(size_t(kBatch * kIn), 11);
  std::vector<int32_t> ys(static_cast<size_t>(kBatch));
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = int32_t(i % kClasses);
  std::vector<float> losses;
  for (int s = 0; s < 3; ++s) {
    // Through pinned memory and back to the host: copies and downloads too.
    auto x = sy::from_vector(xs, {kBatch, kIn}).pin_memory().to(d);
    auto y = sy::from_vector(ys, {kBatch}, d);
    opt.zero_grad();
    auto loss = sy::cross_entropy((*model)(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  sy::synchronize(d);
  return losses;
}

void empty_caches(sy::BackendDevice& d) {
  sy::synchronize(d);
  auto& c = sy::detail::context_of(d);
  c.pool.empty();
  c.host_pool.empty();
}

class Faults : public OnDevice {};

TEST_P(Faults, EachFailingDeviceCallIsACleanErrorAndTheNextRunMatches) {
  auto& d = D();
  const std::vector<float> expected = short_run(d);
  empty_caches(d);
  const uint64_t baseline = d.counters().bytes_in_use;
  int points = 0;
  std::string summary;
  // Allocation twice: once as is (the buffer cache retries, so the run goes
  // on), once failing the retry too (the run fails with OutOfMemory).
  for (int op = -1; op < sy::kNumFaultOps; ++op) {
    auto fop = sy::FaultOp(std::max(op, 0));
    uint32_t times = op < 0 ? 2 : 1;
    int fired = 0, thrown = 0;
    for (uint64_t n = 1; n <= 400; ++n) {
      empty_caches(d);  // so that the run allocates
      d.inject_fault(fop, n, times);
      std::string error;
      try {
        short_run(d);
      } catch (const sy::Error& e) {
        error = e.what();
      }
      bool hit = d.fault_fired(fop);
      d.inject_fault(fop, 0);
      if (!hit) {
        EXPECT_EQ(error, "") << "no fault fired, yet the run failed";
        break;
      }
      ++fired;
      if (!error.empty()) {
        ++thrown;
        EXPECT_NE(error.find("injected fault"), std::string::npos)
            << sy::fault_op_name(fop) << " #" << n << ": an unclear error: " << error;
      }
      // Nothing left behind: with the caches emptied, the device holds what
      // it held before.
      empty_caches(d);
      EXPECT_EQ(d.counters().bytes_in_use, baseline)
          << sy::fault_op_name(fop) << " #" << n << " leaked (" << error << ")";
      // The next run is exactly a run that never failed.
      std::vector<float> again;
      try {
        again = short_run(d);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "after " << sy::fault_op_name(fop) << " #" << n << ": " << e.what();
      }
      EXPECT_EQ(again, expected) << "after " << sy::fault_op_name(fop) << " #" << n;
    }
    points += fired;
    summary += std::string(" ") + sy::fault_op_name(fop) + (times > 1 ? "x2" : "") + "=" +
               std::to_string(fired) + "(" + std::to_string(thrown) + " thrown)";
  }
  std::printf("fault points on %s: %d:%s\n", d.str().c_str(), points, summary.c_str());
  RecordProperty("fault_points", points);
  EXPECT_GT(points, 20) << "the sweep reached too few calls to mean anything";
}

#ifdef SWITCHYARD_TEST_VK_FAULTS
// Driven by tests/vk_fault_sweep.sh, once per call number N with
// SWITCHYARD_VK_FAULT=<RESULT>:<N> (a fresh process each time, since a lost
// device stays lost): the run that meets the fault fails with an error
// naming the Vulkan result (or goes on, if the backend absorbed it); then an
// out-of-memory leaves vulkan:0 usable, with the CPU's results, and a lost
// device refuses every later use with a clear error. Nothing hangs or
// crashes, and the validation layer (on in the tests) reports nothing,
// objects left undestroyed at exit included.
TEST(VulkanFault, DISABLED_OneFaultDuringTraining) {
  const char* spec = std::getenv("SWITCHYARD_VK_FAULT");
  ASSERT_TRUE(spec) << "set SWITCHYARD_VK_FAULT=<RESULT>:<N> (tests/vk_fault_sweep.sh)";
  const std::string result = std::string(spec).substr(0, std::string(spec).rfind(':'));
  const bool lost = result == "VK_ERROR_DEVICE_LOST";
  const std::vector<float> ref = short_run(sy::cpu());
  auto near_ref = [&](const std::vector<float>& got) {
    if (got.size() != ref.size()) return false;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - ref[i]) <= 1e-4f * std::fabs(ref[i]))) return false;
    return true;
  };
  bool lost_type = false;  // the last attempt threw DeviceLost
  auto attempt = [&](std::vector<float>& got) -> std::string {
    lost_type = false;
    try {
      got = short_run(sy::device("vulkan:0"));
      return "";
    } catch (const sy::DeviceLost& e) {
      lost_type = true;
      return e.what();
    } catch (const sy::Error& e) {
      return e.what();
    }
  };
  std::vector<float> first, second;
  std::string err1 = attempt(first);
  auto st = sy::vk_impl::fault_stats();
  std::printf("vulkan fault calls: %llu fired: %d in %s\n", (unsigned long long)st.calls,
              int(st.fired), st.function);
  if (!st.fired) {
    EXPECT_EQ(err1, "");
    EXPECT_TRUE(near_ref(first));
    return;
  }
  if (!err1.empty())
    EXPECT_NE(err1.find(result), std::string::npos)
        << "the error does not name " << result << ": " << err1;
  else
    EXPECT_TRUE(near_ref(first)) << "the fault in " << st.function << " was absorbed wrongly";
  std::string err2 = attempt(second);
  if (lost && !err1.empty()) {
    EXPECT_NE(err2.find("VK_ERROR_DEVICE_LOST"), std::string::npos)
        << "a lost device must refuse later use clearly: " << err2;
    EXPECT_TRUE(lost_type) << "a lost device's refusal is a DeviceLost: " << err2;
  } else {
    EXPECT_EQ(err2, "") << "after " << result << " in " << st.function << ": " << err1;
    EXPECT_TRUE(near_ref(second)) << "after " << result << " in " << st.function;
  }
}

// Run by the ctest entry vulkan_faults:hung_queue_is_a_lost_device with
// SWITCHYARD_VK_WAIT_LIMIT_MS=1: a submission still running after the wait
// limit (a GEMM of a few tens of milliseconds, taken for a hung GPU) makes
// vulkan:0 lost. Every later use throws DeviceLost naming it; the CPU and
// the other devices keep working; nothing hangs, and the validation layer
// reports nothing at exit.
TEST(VulkanWaitLimit, DISABLED_AWaitPastItsLimitIsALostDevice) {
  const char* limit = std::getenv("SWITCHYARD_VK_WAIT_LIMIT_MS");
  ASSERT_TRUE(limit && std::string(limit) == "1") << "run with SWITCHYARD_VK_WAIT_LIMIT_MS=1";
  SKIP_UNLESS_AVAILABLE("vulkan:0");
  sy::Device& vk = sy::device("vulkan:0");
  auto big = [&](sy::Device& d) {
    sy::manual_seed(3);
    sy::Tensor a = sy::randn({1024, 1024}, d), b = sy::randn({1024, 1024}, d);
    return sy::matmul(a, b).sum().item();
  };
  std::string first;
  try {
    (void)big(vk);
  } catch (const sy::DeviceLost& e) {
    first = e.what();
  }
  ASSERT_NE(first.find("SWITCHYARD_VK_WAIT_LIMIT_MS"), std::string::npos)
      << "expected a DeviceLost naming the wait limit, found: '" << first << "'";
  EXPECT_NE(first.find("vulkan:0"), std::string::npos) << first;
  for (int i = 0; i < 2; ++i)
    expect_error([&] { (void)sy::ones({4}, vk).to_vector<float>(); },
                 {"vulkan:0", "lost", "other devices and the CPU still work"});
  EXPECT_THROW((void)sy::ones({4}, vk).to_vector<float>(), sy::DeviceLost);
  const float want = big(sy::cpu());  // the CPU is untouched
  EXPECT_TRUE(std::isfinite(want));
  EXPECT_EQ(sy::ones({3}, sy::cpu()).to_vector<float>(), (std::vector<float>{1, 1, 1}));
  // lavapipe was not really hung: its queue thread is still compiling and
  // running the work given up on. Exiting meanwhile races the static
  // destructors of the LLVM it compiles with (registered at its first
  // compile, so run before the backend's exit handler waits for the
  // queue): a heap corruption in 3 runs of 3 once the step held two more
  // shaders. The queue gets time to drain first; a process whose GPU hangs
  // for real exits as it can.
  std::this_thread::sleep_for(std::chrono::seconds(3));
}
#endif

std::vector<std::string> fault_devices() {
#ifdef SWITCHYARD_TEST_CUDA_EMU
  return gpu_devices();
#else
  std::vector<std::string> d{"cpu", mock_device().str()};
  for (auto& g : gpu_devices()) d.push_back(g);
  return d;
#endif
}

INSTANTIATE_TEST_SUITE_P(Devices, Faults, ::testing::ValuesIn(fault_devices()),
                         [](const auto& info) { return device_param_name(info.param); });

}  // namespace
