// SPDX-License-Identifier: MIT
// libFuzzer target: the CLI's option parser (CLI11 and our checks) on any
// command line. The input is the arguments separated by NUL bytes; parsing
// stops before any command runs. Whatever the arguments, the parser returns
// an exit code: a crash, a sanitizer report or an escaped exception is a
// finding.
#include <cstdint>
#include <string>
#include <vector>

int cli_main(int argc, char** argv, bool execute);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"switchyard"};
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += char(data[i]);
    }
  }
  if (!cur.empty()) args.push_back(cur);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  (void)cli_main(int(args.size()), argv.data(), false);
  return 0;
}
