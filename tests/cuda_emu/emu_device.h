// SPDX-License-Identifier: MIT
// The emulated CUDA device (see emu_device.cpp). Compiled with
// -Dcuda_impl=cuda_emu_impl, so nothing here collides with the real backend.
#pragma once
#include "switchyard/backend/device.h"

namespace switchyard::cuda_impl {
// Registers "cudaemu:0" on first use and returns it.
Device& emulated_cuda_device();
}  // namespace switchyard::cuda_impl
