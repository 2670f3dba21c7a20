// SPDX-License-Identifier: MIT
// The profiler: where a program's time goes, per kernel and per transfer kind,
// measured by the device itself (Vulkan timestamp queries, CUDA events, the
// CPU's clock around each kernel), plus host-side spans for planning and
// submission.
//
// Off by default and free when off (one relaxed atomic load per hook). On with
// profile::set_enabled(true), `switchyard train --profile`, or
// SWITCHYARD_PROFILE=1 for any program: then at exit the summary table goes to
// stderr, and SWITCHYARD_TRACE=FILE also writes a Chrome trace there.
// Device time is read back when the work completes and the device notices
// (a synchronize(), a download, a wait for a reused resource): the exit
// report leaves out work the program never waited for, so a program that
// wants all of it calls synchronize() on its devices before it returns.
//
// Events carry host-clock times (steady_clock ns since the profiler started).
// Device timestamps are mapped onto that clock per submission: a submission's
// first timestamp is placed no earlier than the host's vkQueueSubmit (or
// launch) call, so the trace stays causal whatever the device's clock.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace switchyard {
class Device;
}

namespace switchyard::profile {

enum class Track : uint8_t {
  planning,    // host: the scheduler turning a graph into a Program
  submission,  // host: recording and handing work to the device
  transfer,    // device: uploads, downloads, copies
  kernel,      // device: kernel launches
  step,        // host: one training step (the trainer marks them)
};
const char* track_name(Track t);

struct Event {
  Track track = Track::kernel;
  std::string device;    // "vulkan:0"; empty for host-only spans
  std::string name;      // kernel name, "upload (staging)", "plan", ...
  int64_t start_ns = 0;  // host steady clock, from the profiler's epoch
  int64_t dur_ns = 0;
  uint64_t bytes = 0;         // transfers: bytes moved
  bool device_clock = false;  // timed by the device, not by the host's clock
};

namespace detail {
extern std::atomic<int> g_state;  // -1: not read from the environment yet
int init_from_env();
}  // namespace detail

// Whether hooks record. Reads SWITCHYARD_PROFILE the first time.
inline bool enabled() {
  int s = detail::g_state.load(std::memory_order_relaxed);
  return (s < 0 ? detail::init_from_env() : s) != 0;
}
void set_enabled(bool on);
// Nanoseconds on the host's steady clock since the profiler's epoch.
int64_t now_ns();

void record(Event e);
// Records work on `d` that began at `t0` (now_ns()) and ends now, timed by
// the host's clock: a kernel or memcpy the host itself runs (device_clock:
// the host is that device, as for the CPU backend).
void record_since(Track t, const Device& d, const char* name, int64_t t0, uint64_t bytes = 0,
                  bool device_clock = false);
// Every event recorded so far (a copy), or taken out (cleared).
std::vector<Event> events();
std::vector<Event> take();
void clear();
// Events beyond this many are not kept (a long run would otherwise grow
// without bound): the summary and the trace cover the first this many, and
// format_summary says how many were dropped.
constexpr size_t kMaxTraceEvents = 2'000'000;

// Times a host span on the given track while enabled.
class Span {
 public:
  Span(Track t, const char* name, const Device* d = nullptr);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  bool on_;
  Track track_;
  const char* name_;
  const Device* dev_;
  int64_t t0_ = 0;
};

// One line of the summary: a kernel or transfer kind on one device.
struct Row {
  std::string device, name;
  Track track = Track::kernel;
  uint64_t count = 0, bytes = 0;
  double total_ms = 0, mean_us = 0;
  double share = 0;  // of the step time (when steps were marked), else of the device's busy time
};
struct Summary {
  std::vector<Row> rows;  // kernels, then transfers; each by total time, largest first
  uint64_t steps = 0;
  double step_ms = 0;  // total wall time of the marked steps
  bool shares_of_steps = false;
  double outside_ms = 0;  // device work outside the marked steps (not in rows)
};
Summary summarize(const std::vector<Event>& events);
// The aligned table `switchyard train --profile` prints.
std::string format_summary(const Summary& s);
// Chrome trace JSON (Perfetto, chrome://tracing): one process per device and
// one for the host, one thread (track) per kind. Throws Error on I/O failure.
void write_chrome_trace(const std::string& path, const std::vector<Event>& events);

}  // namespace switchyard::profile
