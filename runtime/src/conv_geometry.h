// SPDX-License-Identifier: MIT
// The geometry fields (SY_CONV_GEOMETRY, switchyard/backend/kernels.h) that
// every convolution kernel's params share, copied from one kernel's params
// into another's: the graph builder's backward launches (ops_nn.cpp) and
// the CUDA backend's cuDNN plans (cuda_dnn.cpp) use it.
#pragma once

namespace switchyard {

template <class To, class From>
To conv_geometry(const From& f) {
  To t{};
  t.batch = f.batch, t.channels = f.channels, t.height = f.height, t.width = f.width;
  t.out_channels = f.out_channels, t.groups = f.groups;
  for (int j = 0; j < 2; ++j) {
    t.kernel[j] = f.kernel[j], t.stride[j] = f.stride[j];
    t.padding[j] = f.padding[j], t.dilation[j] = f.dilation[j];
  }
  return t;
}

}  // namespace switchyard
