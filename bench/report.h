// SPDX-License-Identifier: MIT
// `switchyard bench`'s figures and what it writes of them: the aligned table,
// JSON, CSV (and back, for the staging re-run) and the SVG bar chart.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "switchyard/switchyard.h"

namespace switchyard::bench {

// One figure: a workload on a device.
struct Result {
  std::string group, workload, unit, device;
  double median = 0, min = 0, max = 0;  // throughput from wall time, in `unit`
  double device_median = -1;            // throughput from device time; < 0 if none
  double wall_ms = 0, device_ms = -1;   // median time of one run
  int runs = 0;
  double share = -1;         // of the device's ceiling; < 0 if none
  double speedup = -1;       // against the baseline device; < 0 if none
  double flop_per_unit = 0;  // models: FLOP per sample, for the compute share
  std::string ceiling;       // which ceiling the share is of
};

struct Ceilings {
  double gflops = 0;  // best GEMM
  double gbs = 0;     // device-to-device copy, bytes read + written
};

// Everything one benchmark run measured.
struct Report {
  std::vector<Device*> devices;
  std::map<std::string, Ceilings> ceilings;
  double memcpy_gbs = 0;
  std::vector<std::string> order;  // workloads in the order they ran
  std::vector<Result> results;
  // Workloads a device refused, with its error: shown as "-" in the table
  // and listed under it, never a figure.
  struct NotMeasured {
    std::string workload, device, reason;
  };
  std::vector<NotMeasured> not_measured;
  std::string baseline, title;
  bool quick = false;
  double seconds = 0;
};

// The figure of `workload` on `device`, or nullptr.
const Result* find_result(const Report& r, const std::string& workload, const std::string& device);
// Writes text to path ("-": stdout); `what` names it in the error.
void write_file(const std::string& path, const std::string& text, const char* what);
std::string to_json(const Report& r);
std::string to_csv(const Report& r);
// Parses to_csv's output; rows before its header or with malformed numbers are left out.
std::vector<Result> from_csv(const std::string& text);
// The aligned table: per device, the figure, its share of the ceiling and the speed-up.
std::string to_table(const Report& r);
// A grouped bar chart: one group per workload, one bar per device.
std::string to_svg(const Report& r);

}  // namespace switchyard::bench
