// SPDX-License-Identifier: MIT
// libFuzzer target: device names ("cpu", "vulkan:1", "auto", anything a user
// or $SWITCHYARD_DEVICE may type). Either a device or a switchyard::Error.
// The GPU drivers are kept out (no Vulkan ICD), so every run is the parser
// and the registry, fast and hermetic.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "switchyard/device.h"
#include "switchyard/error.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string name(reinterpret_cast<const char*>(data), size);
  try {
    switchyard::Device& d = switchyard::device(name);
    // A device found is one the name denotes.
    if (name != "auto" && d.str() != name && !(name == "cpu:0" && d.str() == "cpu"))
      __builtin_trap();
  } catch (const switchyard::Error&) {
  }
  return 0;
}
