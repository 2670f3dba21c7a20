// SPDX-License-Identifier: MIT
// Which memory each kind of data lives in, decided from the device's type and
// memory types (docs/vulkan.md, "Memory policy"):
//   - tensors: mapped "zero-copy" memory only on CPU drivers, integrated GPUs
//     and unified-memory devices (where device memory is system memory);
//     device-local memory the host does not map on discrete GPUs, with or
//     without resizable BAR (reading BAR memory from the host is an uncached
//     read over PCIe), reached through the staging ring;
//   - a second heap for tensors when the first is over its budget (an APU's
//     small device-local carve-out, then system memory);
//   - the staging ring in host-cached system memory (the host reads
//     downloads there), the launch table and the status word in BAR memory
//     on a discrete GPU (small per-step data);
//   - non-coherent memory used through flush and invalidate
//     (nonCoherentAtomSize), preferred where it is the cached type.
//
// SWITCHYARD_VK_SIMULATE=<profile> replaces the device's type, memory types,
// heaps, budget and nonCoherentAtomSize with those of another device
// (profiles below), each simulated type backed by a real one, so that the
// decisions and the code paths they select run here; simulated non-coherent
// memory is emulated strictly (the host writes a shadow copy that reaches the
// device only through a flush, and sees the device's writes only after an
// invalidate).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vk_loader.h"

namespace switchyard::vk_impl {

struct Physical;

// What a piece of memory is for.
enum class MemRole {
  tensor,           // tensors' blocks
  tensor_fallback,  // tensors' blocks once the tensor heap is over budget
  staging,          // the staging ring (uploads and downloads)
  table,            // the launch table: host writes, device reads
  status,           // the status word: device writes, host reads
  pinned,           // pinned host blocks: the CPU uses them as tensors
};

struct MemoryPolicy {
  bool zero_copy = false;  // tensors' blocks are mapped and transfers are memcpy
  int tensor = -1, tensor_fallback = -1, staging = -1, table = -1, status = -1, pinned = -1;
  std::string describe(const Physical& p) const;  // for `switchyard devices`
};

// The memory type for `role` among `allowed` (a mask of the device's types,
// simulated ones under SWITCHYARD_VK_SIMULATE), or -1. tensor_fallback
// avoids `avoid_heap` (the tensor heap), and exists only where tensors are
// mapped (an APU; a discrete GPU reports out-of-memory rather than spill).
int pick_memory(const Physical& p, bool zero_copy, MemRole role, uint32_t allowed,
                int avoid_heap = -1);
// The decisions for a device, with every memory type allowed.
MemoryPolicy choose_memory(const Physical& p, bool force_staging);

// Profiles SWITCHYARD_VK_SIMULATE knows.
std::vector<std::string> simulation_profiles();
// Applies SWITCHYARD_VK_SIMULATE to `p` (nothing when unset). Throws Error
// for an unknown profile or a driver whose memory cannot back it.
void apply_simulation(Physical& p);
// Applies profile `name` (tests).
void simulate(Physical& p, const std::string& name);

// The bytes each heap leaves this process: VK_EXT_memory_budget's budget
// less what others use where the driver has it (`usage_ours` is this
// device's use, counted in heapUsage), else the heap's size.
void query_budget(const Physical& p, const uint64_t* usage_ours, uint64_t* out);

}  // namespace switchyard::vk_impl
