// SPDX-License-Identifier: MIT
// Emulation stand-in for the CUDA header (see cuda_runtime_api.h here).
#pragma once
#include "cuda_runtime_api.h"
