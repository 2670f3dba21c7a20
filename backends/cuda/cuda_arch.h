// SPDX-License-Identifier: MIT
// Which GPUs this build's kernels run on: the architectures nvcc compiled
// (CMAKE_CUDA_ARCHITECTURES) against a device's compute capability, so that
// a GPU with no usable kernel image is reported unavailable with the reason
// at enumeration, not failed at its first kernel.
#pragma once
#include <string>
#include <string_view>

namespace switchyard::cuda_impl {

// The architectures compiled into this binary ("75-real,80-real,90"); empty
// where unknown (the emulation).
std::string_view built_architectures();

// Empty when a device of compute capability major.minor can run kernels
// built for `archs` (a CMAKE_CUDA_ARCHITECTURES list, separated by
// semicolons or commas), else why not.
// - SASS (NN-real, or NN) runs on the same major version at an equal or
//   higher minor (sm_86 on 8.6 and 8.9).
// - PTX (NN, or NN-virtual) is compiled by the driver for any compute
//   capability at or above NN.
// - NNa (arch-specific) code, SASS or PTX, runs on NN itself only; NNf
//   (family) code within NN's major version only.
// Lists CMake resolves itself (native, all, all-major) or cannot be read
// are taken as usable: the first kernel launch then says.
std::string unsupported_reason(int major, int minor, std::string_view archs);

}  // namespace switchyard::cuda_impl
