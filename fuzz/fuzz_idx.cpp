// SPDX-License-Identifier: MIT
// libFuzzer target: the IDX loader (gzip or plain) on any bytes. A clear
// switchyard::Error is the expected answer to a bad file; a crash, a
// sanitizer report, another exception or memory beyond libFuzzer's limit is
// a finding. The bytes are given as a file in memory (memfd).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "switchyard/data.h"
#include "switchyard/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("idx", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != ssize_t(size)) return 0;
  try {
    switchyard::data::IdxArray a = switchyard::data::read_idx(path);
    // What is returned is what the header says.
    size_t n = 1;
    for (int64_t d : a.dims) n *= size_t(d);
    if (n != a.data.size()) __builtin_trap();
  } catch (const switchyard::Error&) {
  }
  return 0;
}
