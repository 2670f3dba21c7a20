// Emulation stand-in for the CUDA header (see cuda_emu.h).
#pragma once
#include "cuda_emu.h"
