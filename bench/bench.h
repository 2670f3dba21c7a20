// SPDX-License-Identifier: MIT
// `switchyard bench`: the same workloads on every device, side by side.
#pragma once
#include <string>
#include <vector>

namespace switchyard::bench {

// Runs the benchmark with the command's arguments (after "bench"); returns
// the exit status. --help prints the options. Throws Error on bad arguments
// or a failing device.
int run(const std::vector<std::string>& args);

// Runs this program again (bench/rerun.cpp) as `switchyard ARGS` with
// SWITCHYARD_VK_FORCE_STAGING=1 and without the profiler's variables (its
// report and trace would mix with this process's); true with its stdout in
// `out`, else false with `why` (on Windows it is not done).
bool rerun_with_staging(const std::string& args, std::string& out, std::string& why);

// The known option closest to a misspelt one (at most two edits away), or "".
std::string closest_option(const std::string& word, const std::vector<std::string>& known);
// "a,b,c" -> {"a", "b", "c"} (empty items dropped); an empty list is an
// error naming `what` (the option it came from).
std::vector<std::string> split(const std::string& s, const char* what);

}  // namespace switchyard::bench
