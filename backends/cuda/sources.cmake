# SPDX-License-Identifier: MIT
# The CUDA backend's sources, listed once: the backend builds them with nvcc
# (backends/cuda/CMakeLists.txt) and the tests build them as C++ against the
# host emulation of CUDA (tests/CMakeLists.txt, test_cuda_emu).
# One .cu per kernel family; each opens with what its kernels compute, their
# shapes and their launch geometry.
set(cuda_kernel_sources k_elementwise.cu k_random.cu k_layout.cu k_reduce.cu k_rows.cu k_optim.cu
                        k_conv.cu)
# Host code the emulation runs too (cuda_backend.cpp, the driver probe, is not).
set(cuda_host_sources cuda_device.cpp cuda_graphs.cpp cuda_blas.cpp cuda_dnn.cpp cuda_allocator.cpp cuda_dispatch.cpp cuda_arch.cpp)
# cuDNN's header (the convolutions, cuda_dnn.h), next to the toolkit's or in
# the system's include directories: the library itself is opened at run
# time. Without it the backend builds with its own convolution kernels only.
find_path(SWITCHYARD_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
if(SWITCHYARD_CUDNN_INCLUDE_DIR)
  set(cuda_cudnn_definitions SWITCHYARD_HAVE_CUDNN=1)
  set(cuda_cudnn_include_dirs ${SWITCHYARD_CUDNN_INCLUDE_DIR})
else()
  set(cuda_cudnn_definitions SWITCHYARD_HAVE_CUDNN=0)
  set(cuda_cudnn_include_dirs "")
endif()
