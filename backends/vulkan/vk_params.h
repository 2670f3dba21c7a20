// SPDX-License-Identifier: MIT
// Where each kernel parameter sits in the Vulkan launch table (OpParams in
// vk_launch.h, OpBlock in shaders/common.glsl). Shared by the host-side
// packer (vk_launch.cpp) and the generator of the shaders' parameter structs
// (gen_glsl_params.cpp), so the two cannot disagree. No Vulkan headers here.
#pragma once
#include <cstdint>

#include "switchyard/backend/kernels.h"

namespace switchyard::vk_impl {

constexpr int kTableInts = 16;   // 32-bit integer slots in the launch table
constexpr int kTableFloats = 8;  // float slots

// The first 32-bit table slot of each field of `k` (floats: a float slot),
// written to `slots` (one per field). Integers take one slot per element,
// 64-bit words (W) two: low then high. Returns the int slots used.
inline int table_slots(const ParamLayout& l, int* slots) {
  int ni = 0, nf = 0;
  for (int f = 0; f < l.num_fields; ++f) {
    const ParamField& x = l.fields[f];
    if (x.kind == 'F') {
      slots[f] = nf++;
    } else {
      slots[f] = ni;
      ni += x.kind == 'W' ? 2 : x.count;
    }
  }
  return ni;
}

}  // namespace switchyard::vk_impl
