// SPDX-License-Identifier: MIT
// The CPU's layer kernels (cpu_kernels_nn.cpp): layout passes, the
// convolutions (and im2col, col2im), pooling, batch norm's per-channel passes and embedding.
// Declared here so that cpu_kernels.cpp's table dispatch finds them with the rest.
#pragma once
#include "switchyard/backend/kernels.h"

namespace switchyard::cpu_impl {

void run(const SwapAxesParams& p, void* const* a);
void run(const Im2colParams& p, void* const* a);
void run(const Col2imParams& p, void* const* a);
void run(const Conv2dParams& p, void* const* a);
void run(const Conv2dBackwardInputParams& p, void* const* a);
void run(const Conv2dBackwardWeightParams& p, void* const* a);
void run(const ChannelStatsParams& p, void* const* a);
void run(const ChannelSumsParams& p, void* const* a);
void run(const EmbeddingParams& p, void* const* a);
void run(const EmbeddingBackwardParams& p, void* const* a);
void run(const ChannelAffineParams& p, void* const* a);
void run(const BatchNormCoefParams& p, void* const* a);
void run(const BatchNormCoefBackwardParams& p, void* const* a);
void run(const BatchNormRunningParams& p, void* const* a);
void run(const MaxPool2dParams& p, void* const* a);
void run(const MaxPool2dBackwardParams& p, void* const* a);
void run(const AvgPool2dParams& p, void* const* a);
void run(const AvgPool2dBackwardParams& p, void* const* a);

}  // namespace switchyard::cpu_impl
