// SPDX-License-Identifier: MIT
// The profiler's store, summary table and Chrome trace writer.
#include "switchyard/profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "switchyard/backend/device.h"
#include "switchyard/backend/files.h"
#include "switchyard/error.h"
#include "switchyard/settings.h"

namespace switchyard::profile {
namespace detail {
std::atomic<int> g_state{-1};
}

namespace {

using Clock = std::chrono::steady_clock;

struct Store {
  std::mutex mu;
  std::vector<Event> events;
  uint64_t dropped = 0;
  Clock::time_point epoch = Clock::now();
};
Store& store() {
  static Store* s = new Store;  // never destroyed: atexit reports read it
  return *s;
}

void report_at_exit() {
  auto ev = events();
  std::string summary = format_summary(summarize(ev));
  const size_t first = summary.find_first_not_of('\n'), last = summary.find_last_not_of('\n');
  emit_message(first == std::string::npos ? "" : summary.substr(first, last - first + 1));
  if (const char* t = std::getenv("SWITCHYARD_TRACE"); t && *t) {
    try {
      write_chrome_trace(t, ev);
      emit_message(
          switchyard::detail::cat("profile: wrote Chrome trace ", t, " (", ev.size(), " events)"));
    } catch (const std::exception& e) {
      emit_message(switchyard::detail::cat("profile: ", e.what()));
    }
  }
}

}  // namespace

int detail::init_from_env() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* e = std::getenv("SWITCHYARD_PROFILE");
    bool on = e && *e && std::string(e) != "0";
    store();  // the epoch
    int expected = -1;
    g_state.compare_exchange_strong(expected, on ? 1 : 0);
    if (on) std::atexit(report_at_exit);
  });
  return g_state.load();
}

const char* track_name(Track t) {
  switch (t) {
    case Track::planning:
      return "planning";
    case Track::submission:
      return "submissions";
    case Track::transfer:
      return "transfers";
    case Track::kernel:
      return "kernels";
    case Track::step:
      return "steps";
  }
  return "?";
}

void set_enabled(bool on) {
  detail::init_from_env();
  detail::g_state.store(on ? 1 : 0);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - store().epoch).count();
}

void record(Event e) {
  Store& s = store();
  std::lock_guard lock(s.mu);
  if (s.events.size() >= kMaxTraceEvents) {
    s.dropped++;
    return;
  }
  s.events.push_back(std::move(e));
}

std::vector<Event> events() {
  Store& s = store();
  std::lock_guard lock(s.mu);
  return s.events;
}

std::vector<Event> take() {
  Store& s = store();
  std::lock_guard lock(s.mu);
  std::vector<Event> out;
  out.swap(s.events);
  s.dropped = 0;
  return out;
}

void clear() {
  Store& s = store();
  std::lock_guard lock(s.mu);
  s.events.clear();
  s.dropped = 0;
}

void record_since(Track t, const Device& d, const char* name, int64_t t0, uint64_t bytes,
                  bool device_clock) {
  Event e;
  e.track = t;
  e.device = d.str();
  e.name = name;
  e.start_ns = t0;
  e.dur_ns = now_ns() - t0;
  e.bytes = bytes;
  e.device_clock = device_clock;
  record(std::move(e));
}

Span::Span(Track t, const char* name, const Device* d)
    : on_(enabled()), track_(t), name_(name), dev_(d) {
  if (on_) t0_ = now_ns();
}

Span::~Span() {
  if (!on_) return;
  Event e;
  e.track = track_;
  e.name = name_;
  if (dev_) e.device = dev_->str();
  e.start_ns = t0_;
  e.dur_ns = now_ns() - t0_;
  record(std::move(e));
}

Summary summarize(const std::vector<Event>& events) {
  Summary s;
  std::map<std::tuple<int, std::string, std::string>, Row> rows;
  std::map<std::string, double> busy_ms;           // per device
  std::vector<std::pair<int64_t, int64_t>> steps;  // [start, end)
  for (const Event& e : events)
    if (e.track == Track::step) {
      steps.push_back({e.start_ns, e.start_ns + e.dur_ns});
      s.step_ms += double(e.dur_ns) * 1e-6;
    }
  s.steps = steps.size();
  std::sort(steps.begin(), steps.end());
  // With steps marked, rows hold the work that ran inside a step (the step
  // waits for its work, so that is where its device events fall).
  auto in_step = [&](int64_t t) {
    auto it = std::upper_bound(steps.begin(), steps.end(), std::pair{t, INT64_MAX});
    return it != steps.begin() && t < std::prev(it)->second;
  };
  for (const Event& e : events) {
    if (e.track != Track::kernel && e.track != Track::transfer) continue;
    if (!steps.empty() && !in_step(e.start_ns)) {
      s.outside_ms += double(e.dur_ns) * 1e-6;
      continue;
    }
    Row& r = rows[{int(e.track), e.device, e.name}];
    r.device = e.device, r.name = e.name, r.track = e.track;
    r.count++;
    r.bytes += e.bytes;
    r.total_ms += double(e.dur_ns) * 1e-6;
    busy_ms[e.device] += double(e.dur_ns) * 1e-6;
  }
  s.shares_of_steps = s.steps > 0 && s.step_ms > 0;
  for (auto& [k, r] : rows) {
    r.mean_us = r.count ? r.total_ms * 1e3 / double(r.count) : 0;
    double denom = s.shares_of_steps ? s.step_ms : busy_ms[r.device];
    r.share = denom > 0 ? r.total_ms / denom : 0;
    s.rows.push_back(r);
  }
  std::stable_sort(s.rows.begin(), s.rows.end(), [](const Row& a, const Row& b) {
    if (a.device != b.device) return a.device < b.device;
    if (a.track != b.track) return a.track == Track::kernel;
    return a.total_ms > b.total_ms;
  });
  return s;
}

std::string format_summary(const Summary& s) {
  std::ostringstream o;
  char line[256];
  o << "\nprofile: device time per kernel and transfer kind";
  if (s.shares_of_steps) {
    std::snprintf(line, sizeof line, " over %llu steps (%.3f ms per step, wall)",
                  (unsigned long long)s.steps, s.step_ms / double(s.steps));
    o << line;
  }
  o << "\n";
  if (s.rows.empty()) {
    o << "  (no device work was recorded)\n";
    return o.str();
  }
  const char* share = s.shares_of_steps ? "% of step" : "% of busy";
  if (s.shares_of_steps && s.outside_ms > 0) {
    std::snprintf(line, sizeof line,
                  "  (device work outside the steps, such as set-up and evaluation: %.3f ms, not "
                  "in the table)\n",
                  s.outside_ms);
    o << line;
  }
  std::snprintf(line, sizeof line, "%-10s %-9s %-24s %9s %11s %11s %10s %9s\n", "device", "kind",
                "name", "count", "total ms", "mean us", share, "GB/s");
  o << line;
  std::string dev;
  double kernels = 0, transfers = 0;
  auto totals = [&] {
    if (dev.empty() && kernels == 0 && transfers == 0) return;
    std::snprintf(line, sizeof line, "%-10s %-9s kernels %.3f ms, transfers %.3f ms\n", dev.c_str(),
                  "total", kernels, transfers);
    o << line;
  };
  for (const Row& r : s.rows) {
    if (r.device != dev) {
      totals();
      dev = r.device, kernels = 0, transfers = 0;
    }
    (r.track == Track::kernel ? kernels : transfers) += r.total_ms;
    char gbs[32] = "";
    if (r.track == Track::transfer && r.total_ms > 0)
      std::snprintf(gbs, sizeof gbs, "%.2f", double(r.bytes) / (r.total_ms * 1e-3) * 1e-9);
    std::snprintf(line, sizeof line, "%-10s %-9s %-24s %9llu %11.3f %11.2f %9.1f%% %9s\n",
                  r.device.c_str(), r.track == Track::kernel ? "kernel" : "transfer",
                  r.name.c_str(), (unsigned long long)r.count, r.total_ms, r.mean_us,
                  r.share * 100.0, gbs);
    o << line;
  }
  totals();
  if (uint64_t d = [] {
        Store& st = store();
        std::lock_guard lock(st.mu);
        return st.dropped;
      }())
    o << "profile: " << d << " events beyond " << kMaxTraceEvents << " were not kept\n";
  return o.str();
}

void write_chrome_trace(const std::string& path, const std::vector<Event>& events) {
  // pid 1 is the host; each device gets its own process. tids are tracks.
  std::map<std::string, int> pids;
  auto pid_of = [&](const Event& e) {
    if (e.device.empty() || e.track == Track::planning || e.track == Track::step) return 1;
    auto [it, fresh] = pids.try_emplace(e.device, int(pids.size()) + 2);
    return it->second;
  };
  // Slices on one track must nest or follow each other in a trace viewer.
  // Device tracks are a sequence (the device may overlap independent
  // launches): each slice starts no earlier than the previous one ended.
  // Host tracks nest (a span inside a span); one that overlaps without
  // nesting (another thread) is moved after the one it overlaps.
  std::vector<const Event*> sorted;
  sorted.reserve(events.size());
  for (const Event& e : events) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Event* a, const Event* b) {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->dur_ns > b->dur_ns;
  });
  std::map<std::pair<int, int>, std::vector<int64_t>> open_ends;  // per track
  // Built in memory and written atomically: a kill or a full disk leaves
  // the previous trace, never half of one.
  std::ostringstream f;
  f << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  // One JSON object per line, written as the events are walked.
  auto meta = [&](int pid, int tid, const char* what, const std::string& name) {
    nlohmann::ordered_json m = {
        {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", what}, {"args", {{"name", name}}}};
    f << (first ? "" : ",\n") << m.dump();
    first = false;
  };
  std::map<std::pair<int, int>, bool> named;
  meta(1, 0, "process_name", "host");
  for (const Event* e : sorted) {
    int pid = pid_of(*e), tid = int(e->track) + 1;
    if (!named[{pid, tid}]) {
      if (pid != 1 && !named[{pid, 0}]) {
        meta(pid, 0, "process_name", e->device);
        named[{pid, 0}] = true;
      }
      meta(pid, tid, "thread_name",
           pid == 1 ? std::string(track_name(e->track)) : e->device + " " + track_name(e->track));
      named[{pid, tid}] = true;
    }
    std::vector<int64_t>& ends = open_ends[{pid, tid}];
    bool device_track = e->track == Track::kernel || e->track == Track::transfer;
    int64_t start = e->start_ns, stop = e->start_ns + e->dur_ns;
    for (;;) {
      while (!ends.empty() && ends.back() <= start) ends.pop_back();
      if (ends.empty() || (!device_track && stop <= ends.back())) break;
      start = ends.back();  // overlaps without nesting: after it
    }
    int64_t dur = std::max<int64_t>(0, stop - start);
    ends.push_back(start + dur);
    // Microseconds with nanosecond resolution (three decimals).
    auto us = [](int64_t ns) { return double(ns / 1000) + double(ns % 1000) * 1e-3; };
    nlohmann::ordered_json args = {{"device", e->device},
                                   {"clock", e->device_clock ? "device" : "host"}};
    if (e->bytes) args["bytes"] = e->bytes;
    args["measured_us"] = us(e->dur_ns);
    nlohmann::ordered_json x = {
        {"ph", "X"},       {"pid", pid},      {"tid", tid},     {"cat", track_name(e->track)},
        {"name", e->name}, {"ts", us(start)}, {"dur", us(dur)}, {"args", args}};
    f << ",\n" << x.dump();
  }
  f << "\n]}\n";
  files::write_atomic(path, f.str(), "profile trace");
}

}  // namespace switchyard::profile
