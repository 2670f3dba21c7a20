// SPDX-License-Identifier: MIT
// Emulation stand-in for the CUDA runtime header: the toolkit's declarations
// first (so later toolkit headers find them done), then the emulation, whose
// macros send the backend's calls to the sy_emu_* functions (cudart_emu.h).
#pragma once
#include_next <cuda_runtime_api.h>

#include "cuda_emu.h"
#include "cudart_emu.h"
