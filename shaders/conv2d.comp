// SPDX-License-Identifier: MIT
// conv2d: y = act(conv(x, w) + bias): args y, x, w[, bias]
// (Conv2d geometry params; see backend/kernels.h). An implicit GEMM per group:
// tiling, dispatch and the operands' decoding are in conv_gemm.glsl.
#version 450
#define CONV_MODE 0
#include "conv_gemm.glsl"
