// SPDX-License-Identifier: MIT
// Sample 1: pick a device the way PyTorch users do, with fallback.
//   PyTorch:  device = "cuda" if torch.cuda.is_available() else "cpu"
#include <cstdio>

#include "switchyard/switchyard.h"

namespace sy = switchyard;

int main() {
  // Every backend this build knows, and why an absent one is absent.
  for (const auto& b : sy::backends()) {
    if (!b.available) std::printf("%-7s unavailable: %s\n", b.name.c_str(), b.reason.c_str());
    for (const auto& d : b.devices)
      std::printf("%-7s %s (%s)\n", d->str().c_str(), d->info().name.c_str(),
                  sy::device_type_name(d->info().type));
  }
  // "auto": the first CUDA GPU, else the first Vulkan GPU, else the CPU.
  // SWITCHYARD_DEVICE=vulkan:0 (or any device string) overrides it.
  sy::Device& dev = sy::default_device();
  std::printf("using %s\n", dev.str().c_str());

  // Asking for a device that is not there is a clear error, not a crash.
  try {
    sy::device("cuda:7");
  } catch (const sy::Error& e) {
    std::printf("as expected: %s\n", e.what());
  }
  return 0;
}
