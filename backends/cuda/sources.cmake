# SPDX-License-Identifier: MIT
# The CUDA backend's sources, listed once: the backend builds them with nvcc
# (backends/cuda/CMakeLists.txt) and the tests build them as C++ against the
# host emulation of CUDA (tests/CMakeLists.txt, test_cuda_emu).
# One .cu per kernel family; each opens with what its kernels compute, their
# shapes and their launch geometry.
set(cuda_kernel_sources k_elementwise.cu k_random.cu k_layout.cu k_reduce.cu k_rows.cu k_optim.cu
                        k_conv.cu)
# Host code the emulation runs too (cuda_backend.cpp, the driver probe, is not).
set(cuda_host_sources cuda_device.cpp cuda_graphs.cpp cuda_blas.cpp cuda_allocator.cpp cuda_dispatch.cpp cuda_arch.cpp)
