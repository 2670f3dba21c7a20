// SPDX-License-Identifier: MIT
// The bench's second process (see bench.h): on Linux it finds itself through
// /proc/self/exe and runs under env(1); elsewhere it is not done.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench.h"

#if defined(__linux__)
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace switchyard::bench {

#if defined(__linux__)
bool rerun_with_staging(const std::string& args, std::string& out, std::string& why) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    why = "could not find this program (/proc/self/exe)";
    return false;
  }
  exe[n] = 0;
  std::string cmd = std::string(
                        "env -u SWITCHYARD_PROFILE -u SWITCHYARD_TRACE "
                        "SWITCHYARD_VK_FORCE_STAGING=1 '") +
                    exe + "' " + args;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    why = std::string("could not start (") + std::strerror(errno) + "): " + cmd;
    return false;
  }
  char buf[4096];
  while (size_t k = std::fread(buf, 1, sizeof buf, p)) out.append(buf, k);
  int st = pclose(p);
  if (st == -1)
    why = "could not be waited for";
  else if (WIFSIGNALED(st))
    why = "was killed by signal " + std::to_string(WTERMSIG(st));
  else if (WEXITSTATUS(st) != 0)
    why = "failed (exit code " + std::to_string(WEXITSTATUS(st)) + ")";
  if (!why.empty()) why += ": " + cmd;
  return why.empty();
}
#else
bool rerun_with_staging(const std::string&, std::string&, std::string& why) {
  why = "is not done on this platform (run with SWITCHYARD_VK_FORCE_STAGING=1 for it)";
  return false;
}
#endif

}  // namespace switchyard::bench
