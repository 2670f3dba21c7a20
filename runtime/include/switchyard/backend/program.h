// SPDX-License-Identifier: MIT
// A Program is what the Scheduler hands to a Device: an ordered list of kernel
// launches over numbered buffer slots. The same Program is replayed for every
// training step with the same graph; only the slot bindings and the scalar
// params change between runs.
#pragma once
// Marks the backend API, so user-only code can check it stays out.
#define SWITCHYARD_BACKEND_API 1
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "switchyard/backend/kernels.h"

namespace switchyard {

// An opaque device allocation. `handle` means what the backend says it means
// (a host pointer on the CPU, a suballocation record on Vulkan, ...).
struct Buffer {
  void* handle = nullptr;
  size_t bytes = 0;
  explicit operator bool() const { return handle != nullptr; }
  bool operator==(const Buffer&) const = default;
};

// A buffer plus a byte offset into it: what a slot is bound to for one run.
struct Binding {
  Buffer buffer;
  size_t offset = 0;
};

// One buffer argument of a launch: slot index plus a static byte offset.
struct Arg {
  uint32_t slot = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;  // extent read or written, for hazard tracking
};

struct Instr {
  Kernel kernel{};
  uint8_t nargs = 0;
  std::array<Arg, 5> args{};
  KernelParams params{};
  // A multi-tensor kernel's (kMultiTensor) arguments: Program::more_args
  // [more, more + nmore), in the order its kernel table entry gives; its
  // `args` are unused (nargs 0).
  uint32_t more = 0, nmore = 0;
};

struct Program {
  uint64_t id = 0;  // unique per planned program; lets backends cache recordings
  uint32_t num_slots = 0;
  std::vector<Instr> instrs;
  std::vector<Arg> more_args;  // the multi-tensor launches' arguments
};

}  // namespace switchyard
