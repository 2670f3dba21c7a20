// SPDX-License-Identifier: MIT
// libFuzzer target: safetensors files and model files on any bytes, through
// the same path as a user's load (a mapped file, the header checks, the
// dtype conversions, the recorded architecture and a strict
// load_state_dict). A clear switchyard::Error is the expected answer to a
// bad file; a crash, a sanitizer report, another exception or memory beyond
// libFuzzer's limit is a finding. The bytes are given as a file in memory
// (memfd).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "switchyard/error.h"
#include "switchyard/nn.h"
#include "switchyard/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("safetensors", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != ssize_t(size)) return 0;
  try {
    switchyard::SafetensorsFile f(path);
    for (const auto& e : f.entries()) {
      try {
        switchyard::Tensor t = f.tensor(e.name);
        if (t.shape() != e.shape) __builtin_trap();  // what is returned is what the header says
      } catch (const switchyard::Error&) {           // a dtype Switchyard lacks
      }
    }
  } catch (const switchyard::Error&) {
  }
  try {
    // Parameters are made lazily, so an architecture claiming huge layers
    // costs nothing until the strict load has matched it against the file.
    switchyard::nn::load(path);
  } catch (const switchyard::Error&) {
  }
  return 0;
}
