# SPDX-License-Identifier: MIT
# CUDA toolkit detection, done at the top level (enable_language must see the
# whole project). Finds nvcc on PATH, under $CUDA_PATH or at /usr/local/cuda;
# enables the CUDA language only when SWITCHYARD_CUDA is AUTO or ON and the
# toolkit is there. Sets SWITCHYARD_CUDA_FOUND and SWITCHYARD_CUDA_WHY.
set(SWITCHYARD_CUDA_FOUND OFF)
set(SWITCHYARD_CUDA_WHY "")
if(SWITCHYARD_CUDA STREQUAL "OFF")
  return()
endif()
if(NOT CMAKE_CUDA_COMPILER)
  find_program(SWITCHYARD_NVCC nvcc HINTS ENV CUDA_PATH PATHS /usr/local/cuda PATH_SUFFIXES bin)
  if(SWITCHYARD_NVCC)
    set(CMAKE_CUDA_COMPILER ${SWITCHYARD_NVCC})
  endif()
endif()
if(NOT CMAKE_CUDA_COMPILER)
  set(SWITCHYARD_CUDA_WHY "not built: nvcc not found (on PATH, in $CUDA_PATH/bin or /usr/local/cuda/bin)")
elseif(NOT CMAKE_CUDA_ARCHITECTURES)
  # SASS for Turing, Ampere (A100, RTX 30), Ada (RTX 40, L4) and Hopper, and
  # compute_90 PTX that the driver compiles for any newer card. Toolkits from
  # CUDA 12.8 on also get SASS for Blackwell (sm_100: B200, GB200; sm_120:
  # RTX 50, RTX PRO), which would otherwise JIT every kernel at start-up;
  # 10.3 and 12.1 run those too. (Thor, 11.0, JITs the PTX.) GPUs older than
  # Turing are left out at enumeration with the reason (cuda_arch.cpp).
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --version OUTPUT_VARIABLE nvcc_out ERROR_QUIET)
  string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" _ "${nvcc_out}")
  set(archs "75-real;80-real;86-real;89-real;90")
  if(CMAKE_MATCH_1 AND CMAKE_MATCH_1 VERSION_GREATER_EQUAL 12.8)
    list(APPEND archs "100-real;120-real")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${archs}" CACHE STRING "CUDA architectures")
endif()
if(CMAKE_CUDA_COMPILER)
  # nvcc gets C++17 (CMake 3.25 has no C++20 flag for it); the .cu files
  # include only C++17 headers (kernels.h, dtype.h, error.h).
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  enable_language(CUDA)
  find_package(CUDAToolkit)
  if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart_static)
    set(SWITCHYARD_CUDA_WHY "not built: the CUDA toolkit at ${CMAKE_CUDA_COMPILER} has no static runtime (cudart_static)")
  elseif(CUDAToolkit_VERSION VERSION_LESS 11.8)
    set(SWITCHYARD_CUDA_WHY "not built: CUDA ${CUDAToolkit_VERSION} is older than 11.8")
  elseif(NOT EXISTS ${CUDAToolkit_INCLUDE_DIRS}/cublasLt.h)
    set(SWITCHYARD_CUDA_WHY "not built: cublasLt.h not found in ${CUDAToolkit_INCLUDE_DIRS}")
  else()
    set(SWITCHYARD_CUDA_FOUND ON)
  endif()
endif()
if(NOT SWITCHYARD_CUDA_FOUND AND SWITCHYARD_CUDA STREQUAL "ON")
  message(FATAL_ERROR "SWITCHYARD_CUDA=ON but the CUDA backend cannot be built: ${SWITCHYARD_CUDA_WHY}")
endif()
