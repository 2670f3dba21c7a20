// SPDX-License-Identifier: MIT
// The profiler: on every device, the kernel events it records are exactly the
// launches the device ran (by the device's own counters), transfers carry the
// bytes that moved, and profiling leaves the replay path as it was. Plus the
// summary table's arithmetic and the Chrome trace writer.
// Runs on cpu and the GPU devices (in test_cuda_emu: the emulated CUDA device);
// ctest runs the Vulkan cases again in the forced-staging mode, where
// transfers are device copies timed by timestamp queries.
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "helpers.h"
#include "mlp.h"
#include "switchyard/profile.h"

namespace prof = sy::profile;
using sy::Tensor;

namespace {

// Turns the profiler on for a scope, starting empty; off again after.
struct Profiling {
  Profiling() {
    prof::clear();
    prof::set_enabled(true);
  }
  ~Profiling() {
    prof::set_enabled(false);
    prof::clear();
  }
};

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

std::vector<std::string> profiled_devices() {
#ifdef SWITCHYARD_TEST_CUDA_EMU
  return gpu_devices();
#else
  std::vector<std::string> names = {"cpu"};
  for (auto& g : gpu_devices()) names.push_back(g);
  return names;
#endif
}

class ProfiledDevice : public OnDevice {};

[[maybe_unused]] prof::Event ev(prof::Track t, const std::string& dev, const std::string& name,
                                int64_t start, int64_t dur, uint64_t bytes = 0) {
  prof::Event e;
  e.track = t, e.device = dev, e.name = name, e.start_ns = start, e.dur_ns = dur, e.bytes = bytes;
  e.device_clock = t == prof::Track::kernel;
  return e;
}

}  // namespace

TEST_P(ProfiledDevice, KernelEventsAreTheLaunchesTheDeviceRan) {
  sy::BackendDevice& d = D();
  sy::manual_seed(3);
  auto model = sy::models::mlp({20, 16, 8, 4});
  model->to(d);
  sy::optim::Adam opt(model->parameters(), 1e-2f);
  std::vector<int32_t> labels(32);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t(i % 4);
  auto step = [&](int i) {
    Tensor x = sy::from_vector(random_vec(32 * 20, uint32_t(7 + i)), {32, 20}).to(d);
    Tensor y = sy::from_vector(labels, {32}).to(d);
    opt.zero_grad();
    Tensor loss = sy::cross_entropy((*model)(x), y);
    loss.backward();
    opt.step();
    return loss.item();
  };
  for (int i = 0; i < 3; ++i) step(i);  // warm: recorded, captured
  d.synchronize();

  std::vector<prof::Event> events;
  sy::Counters c0, c1;
  {
    Profiling on;
    c0 = d.counters();
    for (int i = 3; i < 7; ++i) {
      prof::Span s(prof::Track::step, "train step", &d);
      step(i);
    }
    d.synchronize();  // every measurement read back
    c1 = d.counters();
    events = prof::events();
  }
  std::map<std::string, uint64_t> by_kernel, expected;
  uint64_t up = 0, down = 0, planning = 0, submissions = 0;
  for (const prof::Event& e : events) {
    if (e.device != d.str()) continue;
    EXPECT_GE(e.dur_ns, 0) << e.name;
    EXPECT_GE(e.start_ns, 0) << e.name;
    if (e.track == prof::Track::kernel) {
      by_kernel[e.name]++;
      EXPECT_TRUE(e.device_clock) << e.name << ": kernels are timed by the device";
    }
    if (e.track == prof::Track::transfer && e.name.rfind("upload", 0) == 0) up += e.bytes;
    if (e.track == prof::Track::transfer && e.name.rfind("download", 0) == 0) down += e.bytes;
    planning += e.track == prof::Track::planning;
    submissions += e.track == prof::Track::submission;
  }
  for (size_t k = 0; k < size_t(sy::kNumKernels); ++k)
    if (uint64_t n = c1.launches_by_kernel[k] - c0.launches_by_kernel[k])
      expected[sy::kernel_name(sy::Kernel(k))] = n;
  EXPECT_EQ(by_kernel, expected) << "one kernel event per launch, by name";
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(up, c1.bytes_uploaded - c0.bytes_uploaded) << "upload events carry every uploaded byte";
  EXPECT_EQ(down, c1.bytes_downloaded - c0.bytes_downloaded)
      << "download events carry every downloaded byte";
  EXPECT_GE(planning, 4u) << "the scheduler's planning spans";
  EXPECT_GE(submissions, 4u) << "the submission spans";

  // The summary: every kernel row's count matches, and the shares are of the
  // marked steps.
  prof::Summary s = prof::summarize(events);
  EXPECT_EQ(s.steps, 4u);
  EXPECT_TRUE(s.shares_of_steps);
  for (const prof::Row& r : s.rows)
    if (r.device == d.str() && r.track == prof::Track::kernel) {
      EXPECT_EQ(r.count, expected[r.name]) << r.name;
      EXPECT_GE(r.share, 0.0);
      EXPECT_LE(r.share, 1.0) << r.name
                              << ": device work inside a step takes at most the step's time";
    }
  std::string table = prof::format_summary(s);
  EXPECT_NE(table.find("gemm"), std::string::npos) << table;
  EXPECT_NE(table.find("% of step"), std::string::npos) << table;

  // The trace: one slice per kernel event.
  std::string path = ::testing::TempDir() + "sy_trace_" + device_param_name(d.str()) + ".json";
  prof::write_chrome_trace(path, events);
  std::string t = read_file(path);
  std::remove(path.c_str());
  uint64_t kernels = 0;
  for (auto& [k, n] : expected) kernels += n;
  uint64_t all_kernel_events = 0;
  for (const prof::Event& e : events) all_kernel_events += e.track == prof::Track::kernel;
  EXPECT_EQ(count(t, "\"cat\":\"kernels\""), all_kernel_events);
  EXPECT_GE(all_kernel_events, kernels);
  EXPECT_NE(t.find("\"name\":\"thread_name\",\"args\":{\"name\":\"" + d.str() + " kernels\"}"),
            std::string::npos);

  // Off again: back to the replayed path, nothing recorded.
  for (int i = 7; i < 9; ++i) step(i);  // recorded (captured) again once
  auto r0 = d.counters();
  for (int i = 9; i < 12; ++i) step(i);
  auto r1 = d.counters();
  EXPECT_EQ(r1.command_recordings - r0.command_recordings, 0u)
      << "profiling left the replay path as it was";
  EXPECT_EQ(r1.command_updates - r0.command_updates, 0u) << "replayed, not updated";
  EXPECT_TRUE(prof::events().empty());
}

TEST_P(ProfiledDevice, TransfersOfEveryKindAreMeasured) {
  sy::BackendDevice& d = D();
  const size_t n = (20 << 20) + 256;  // three 8 MiB staging chunks on GPUs, the last partial
  std::vector<char> host(n, 7), back(n, 0);
  sy::Buffer a = d.allocate(n), b = d.allocate(n);
  std::vector<prof::Event> events;
  {
    Profiling on;
    d.upload(a, 0, host.data(), n);
    d.copy(a, 0, b, 0, n);
    d.download(b, 0, back.data(), n);
    d.synchronize();
    events = prof::events();
  }
  d.release(a);
  d.release(b);
  EXPECT_EQ(back, host);
  std::map<std::string, uint64_t> bytes;
  for (const prof::Event& e : events)
    if (e.device == d.str() && e.track == prof::Track::transfer)
      bytes[e.name.substr(0, e.name.find(' '))] += e.bytes;
  EXPECT_EQ(bytes["upload"], n);
  EXPECT_EQ(bytes["copy"], n);
  EXPECT_EQ(bytes["download"], n);
}

INSTANTIATE_TEST_SUITE_P(Devices, ProfiledDevice, ::testing::ValuesIn(profiled_devices()),
                         [](const auto& info) { return device_param_name(info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ProfiledDevice);

#ifndef SWITCHYARD_TEST_CUDA_EMU
TEST(Profile, SummaryCountsTotalsAndSharesOfTheSteps) {
  using T = prof::Track;
  std::vector<prof::Event> e = {
      ev(T::step, "", "train step", 0, 1000),
      ev(T::kernel, "gpu:0", "gemm", 100, 300),
      ev(T::kernel, "gpu:0", "gemm", 400, 100),
      ev(T::kernel, "gpu:0", "relu", 500, 100),
      ev(T::transfer, "gpu:0", "upload (staging)", 10, 50, 4096),
      ev(T::step, "", "train step", 2000, 1000),
      ev(T::kernel, "gpu:0", "gemm", 2100, 200),
      ev(T::kernel, "gpu:0", "gemm", 5000, 700),  // outside the steps: evaluation
      ev(T::planning, "gpu:0", "plan", 0, 20),
  };
  prof::Summary s = prof::summarize(e);
  EXPECT_EQ(s.steps, 2u);
  EXPECT_DOUBLE_EQ(s.step_ms, 2000e-6);
  EXPECT_DOUBLE_EQ(s.outside_ms, 700e-6);
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.rows[0].name, "gemm");  // kernels first, largest first
  EXPECT_EQ(s.rows[0].count, 3u);
  EXPECT_DOUBLE_EQ(s.rows[0].total_ms, 600e-6);
  EXPECT_DOUBLE_EQ(s.rows[0].mean_us, 0.2);
  EXPECT_DOUBLE_EQ(s.rows[0].share, 0.3);
  EXPECT_EQ(s.rows[1].name, "relu");
  EXPECT_EQ(s.rows[2].name, "upload (staging)");
  EXPECT_EQ(s.rows[2].bytes, 4096u);
  EXPECT_DOUBLE_EQ(s.rows[2].share, 0.025);

  // Without steps: shares of the device's busy time, everything counted.
  e.erase(e.begin() + 5);
  e.erase(e.begin());
  s = prof::summarize(e);
  EXPECT_FALSE(s.shares_of_steps);
  EXPECT_EQ(s.rows[0].count, 4u);
  double total = 0;
  for (auto& r : s.rows) total += r.share;
  EXPECT_NEAR(total, 1.0, 1e-12);
  std::string table = prof::format_summary(s);
  EXPECT_NE(table.find("% of busy"), std::string::npos) << table;
  EXPECT_NE(table.find("upload (staging)"), std::string::npos) << table;
}

TEST(Profile, TraceSlicesNestOrFollowOnEachTrack) {
  using T = prof::Track;
  // Two kernels the device overlapped, and host spans that nest.
  std::vector<prof::Event> e = {
      ev(T::kernel, "gpu:0", "a", 1000, 500),
      ev(T::kernel, "gpu:0", "b", 1200, 500),
      ev(T::planning, "gpu:0", "plan", 0, 900),
      ev(T::planning, "gpu:0", "build plan", 100, 300),
  };
  std::string path = ::testing::TempDir() + "sy_trace_unit.json";
  prof::write_chrome_trace(path, e);
  std::string t = read_file(path);
  std::remove(path.c_str());
  auto trace = nlohmann::json::parse(t);
  auto slice = [&](const std::string& name) {
    for (const auto& x : trace["traceEvents"])
      if (x["ph"] == "X" && x["name"] == name) return x;
    ADD_FAILURE() << "no slice " << name << " in " << t;
    return nlohmann::json();
  };
  auto b = slice("b"), plan = slice("build plan");
  EXPECT_DOUBLE_EQ(b["ts"].get<double>(), 1.5) << "b starts where a ended: " << t;
  EXPECT_DOUBLE_EQ(b["dur"].get<double>(), 0.2) << "and keeps its end: " << t;
  EXPECT_DOUBLE_EQ(b["args"]["measured_us"].get<double>(), 0.5) << "the measured time is kept";
  EXPECT_DOUBLE_EQ(plan["ts"].get<double>(), 0.1) << "a nested host span stays where it was: " << t;
  EXPECT_DOUBLE_EQ(plan["dur"].get<double>(), 0.3);
  EXPECT_EQ(count(t, "\"ph\":\"X\""), e.size());
}

TEST(Profile, UnwritableTraceIsAClearError) {
  expect_error([] { prof::write_chrome_trace("/nonexistent-dir/t.json", {}); },
               {"[profile trace]", "/nonexistent-dir/t.json", "No such file or directory"});
}

TEST(Profile, OffByDefaultAndRecordsNothing) {
  if (std::getenv("SWITCHYARD_PROFILE")) GTEST_SKIP() << "SWITCHYARD_PROFILE is set for this run";
  prof::clear();
  EXPECT_FALSE(prof::enabled());
  Tensor a = sy::ones({8, 8});
  (void)sy::sum(sy::matmul(a, a)).item();
  EXPECT_TRUE(prof::events().empty());
}
#endif
