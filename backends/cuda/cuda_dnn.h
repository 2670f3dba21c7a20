// SPDX-License-Identifier: MIT
// Convolutions for the CUDA backend through cuDNN, opened with dlopen at run
// time as cuBLAS is (cuda_blas.h): the binary does not link it, and a machine
// without it runs the backend's own implicit-GEMM kernels (k_conv.cu).
//
// cuDNN's convolution entry points of the v7 API (cudnnConvolutionForward,
// ...BackwardData, ...BackwardFilter and their Find/Get algorithm queries)
// are used: cuDNN 9 keeps them (marked deprecated in favour of its graph
// API) and they are the ones PyTorch's cudnn.benchmark path calls. Each
// convolution shape gets a plan once, outside any CUDA graph capture: its
// descriptors and the first algorithm cuDNN's heuristics rank that fits the
// device's workspace (the same choice every run), or with
// SWITCHYARD_CUDNN_BENCHMARK=1 the fastest by timing every algorithm on the
// launch's own buffers (cudnn.benchmark's choice, which may differ between
// runs). Only deterministic algorithms are taken unless
// SWITCHYARD_CUDNN_DETERMINISTIC=0, and TF32 only where
// set_float32_matmul_precision allows it, as for the GEMMs.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_kernels.h"
#include "switchyard/backend/program.h"

#if SWITCHYARD_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace switchyard::cuda_impl {

// Which convolution path a device takes (SWITCHYARD_CUDA_CONV): `auto` (the
// default: cuDNN when it loads, else the own kernels), `cudnn` (required: a
// device without it throws) or `own`. Throws Error on another value.
enum class ConvPath { automatic, cudnn, own };
ConvPath conv_path();

// cuDNN's version and where it was found ("9.19.0 (/usr/local/cuda/lib64/
// libcudnn.so.9)"), or throws Error saying why it cannot be used (not
// built with its header, library not found, an entry point missing).
std::string cudnn_description();

// The device properties that describe the path (`switchyard devices`):
// "convolution" (cuDNN's version, or the own kernels and why), and with
// cuDNN "conv_weight_gradient" = "whole", which tells the graph builder to
// ask for the weight gradient in one sum (ops_nn.cpp): cuDNN reduces over
// the batch itself, and a launch asking for several partial sums runs the
// own kernel.
std::vector<std::pair<std::string, std::string>> conv_properties();

#if SWITCHYARD_HAVE_CUDNN
// The entry points used, resolved once per process.
struct DnnApi {
  void* lib = nullptr;
  std::string path;
// clang-format off
#define SY_CUDNN_FUNCS(X)                                                                     \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)   \
  X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnDestroyTensorDescriptor) \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor) \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor)                      \
  X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType)                             \
  X(cudnnDestroyConvolutionDescriptor) X(cudnnGetConvolution2dForwardOutputDim)               \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount) X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount) \
  X(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount)                                       \
  X(cudnnFindConvolutionForwardAlgorithmEx) X(cudnnGetConvolutionForwardAlgorithm_v7)         \
  X(cudnnConvolutionForward)                                                                  \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx) X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
  X(cudnnConvolutionBackwardData)                                                             \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx)                                            \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) X(cudnnConvolutionBackwardFilter)
#define SY_DECLARE_FN(name) decltype(&::name) name = nullptr;
  SY_CUDNN_FUNCS(SY_DECLARE_FN)
#undef SY_DECLARE_FN
  // clang-format on
};

// Opens libcudnn (the major version of the header built against: its
// soname, then $CUDA_PATH/lib64, /usr/local/cuda/lib64 and the build's
// toolkit) and resolves every entry point. Throws Error saying what is
// missing.
const DnnApi& dnn_api();
#endif

// Thrown by Dnn::run for a shape first met inside a CUDA graph capture:
// the capture is abandoned and the Program runs eagerly (the plan is made
// and its algorithm first run there), without counting as a failed
// capture (cuda_graphs.cpp).
struct EagerRunNeeded : std::exception {
  const char* what() const noexcept override {
    return "a cuDNN plan is made outside a graph capture (internal)";
  }
};

// One device's cuDNN handle and convolution plans. Not thread-safe (the
// device's lock covers it).
class Dnn {
 public:
  Dnn() = default;
  ~Dnn();
  Dnn(const Dnn&) = delete;
  Dnn& operator=(const Dnn&) = delete;

  // Creates the handle on `stream`; `workspace` (of `workspace_bytes`, shared
  // with the GEMMs: one stream runs both in order) serves every call, so
  // nothing allocates during a CUDA graph capture. Throws Error when cuDNN
  // cannot be used.
  void init(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  bool ready() const { return handle_ != nullptr; }
  // Runs a convolution kernel of the table (conv2d, conv2d_backward_input,
  // conv2d_backward_weight) with args as the table's. Returns false, having
  // run nothing, for a shape cuDNN does not take (an empty tensor, a size
  // past int, an unsupported configuration): the caller launches its own
  // kernel.
  bool run(const Instr& ins, void* const* args, const LaunchEnv& env);
  void release();

 private:
#if SWITCHYARD_HAVE_CUDNN
  struct Plan {
    bool usable = false;  // false: cuDNN refused the shape, the own kernels run it
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    int algo = 0;
    size_t workspace = 0;
    bool ran = false;  // run once: cuDNN took it
  };
  // Kernel, geometry (14 numbers), the operands' alignments and TF32.
  using Key = std::tuple<int, std::array<int64_t, 14>, int>;
  Plan& plan(Kernel k, const Conv2dBackwardInputParams& g, void* const* args);
  void make_plan(Plan& pl, Kernel k, const Conv2dBackwardInputParams& g,
                 const std::array<int64_t, 14>& geo, void* const* args);
  void destroy(Plan& p);
  std::map<Key, Plan> plans_;
  cudnnHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool tf32_ = false;  // the current run's LaunchEnv::tf32
  bool deterministic_ = true, benchmark_ = false;
#else
  void* handle_ = nullptr;  // (never set: a build without cuDNN's header)
#endif
};

}  // namespace switchyard::cuda_impl
