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

// The known option closest to a misspelt one (at most two edits away), or "".
std::string closest_option(const std::string& word, const std::vector<std::string>& known);

}  // namespace switchyard::bench
