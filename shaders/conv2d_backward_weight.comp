// SPDX-License-Identifier: MIT
// conv2d_backward_weight: the weight gradient's partial sums: args out (splits, OC, C/groups*kh*kw), dy, x
// (Conv2d geometry params; see backend/kernels.h). An implicit GEMM per group:
// tiling, dispatch and the operands' decoding are in conv_gemm.glsl.
#version 450
#define CONV_MODE 2
#include "conv_gemm.glsl"
