// `switchyard bench`: the same workloads on every device, side by side.
#pragma once
#include <string>
#include <vector>

namespace switchyard::bench {

extern const char* const kUsage;
// Runs the benchmark with the command's arguments (after "bench"); returns
// the exit status. Throws Error on bad arguments or a failing device.
int run(const std::vector<std::string>& args);

}  // namespace switchyard::bench
