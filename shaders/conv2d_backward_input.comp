// SPDX-License-Identifier: MIT
// conv2d_backward_input: dx from dy and w: args dx, dy, w
// (Conv2d geometry params; see backend/kernels.h). An implicit GEMM per group:
// tiling, dispatch and the operands' decoding are in conv_gemm.glsl.
#version 450
#define CONV_MODE 1
#include "conv_gemm.glsl"
