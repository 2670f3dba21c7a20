// SPDX-License-Identifier: MIT
// See cuda_dnn.h. The table's convolutions are NCHW with the weight
// (OC, C/groups, KH, KW), cross-correlation, as cuDNN's defaults: a plan is
// three 4-d descriptors and a convolution descriptor per shape.
#include "cuda_dnn.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "conv_geometry.h"
#include "cuda_blas.h"
#include "cuda_check.h"
#include "switchyard/backend/platform.h"

namespace switchyard::cuda_impl {

ConvPath conv_path() {
  const char* e = std::getenv("SWITCHYARD_CUDA_CONV");
  const std::string v = e ? e : "";
  if (v.empty() || v == "auto") return ConvPath::automatic;
  if (v == "cudnn") return ConvPath::cudnn;
  if (v == "own") return ConvPath::own;
  throw Error(
      detail::cat("[cuda] expected SWITCHYARD_CUDA_CONV=auto, cudnn or own, found '", v, "'"));
}

std::vector<std::pair<std::string, std::string>> conv_properties() {
  try {
    if (conv_path() == ConvPath::own)
      return {{"convolution", "own implicit GEMM (SWITCHYARD_CUDA_CONV=own)"}};
    return {{"convolution", "cuDNN " + cudnn_description()}, {"conv_weight_gradient", "whole"}};
  } catch (const std::exception& x) {
    return {{"convolution", detail::cat("own implicit GEMM (", x.what(), ")")}};
  }
}

#if !SWITCHYARD_HAVE_CUDNN

std::string cudnn_description() {
  throw Error(
      "[cuda] this build has no cuDNN support: cudnn.h was not found next to the CUDA toolkit's "
      "headers when it was configured");
}
Dnn::~Dnn() = default;
void Dnn::init(cudaStream_t, void*, size_t) { (void)cudnn_description(); }
bool Dnn::run(const Instr&, void* const*, const LaunchEnv&) { return false; }
void Dnn::release() {}

#else

namespace {

struct Loaded {
  DnnApi api;
  std::string error;
};

Loaded load() {
  Loaded l;
  const std::string soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  std::string err;
  l.api.lib = open_toolkit_library(soname, l.api.path, err);
  if (!l.api.lib) {
    l.error =
        detail::cat("cuDNN ", CUDNN_MAJOR, " not found (looked for ", soname,
                    " on the library path, in $CUDA_PATH/lib64 and /usr/local/cuda/lib64): ", err);
    return l;
  }
  std::string missing;
#define SY_RESOLVE(name)                                                                           \
  l.api.name = reinterpret_cast<decltype(l.api.name)>(platform::library_symbol(l.api.lib, #name)); \
  if (!l.api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  SY_CUDNN_FUNCS(SY_RESOLVE)
#undef SY_RESOLVE
  if (!missing.empty()) {
    l.error = detail::cat("cuDNN at ", l.api.path, " lacks entry points: ", missing);
    return l;
  }
  // The algorithm-result structs are read with this header's layout: the
  // same major version only.
  if (const size_t v = l.api.cudnnGetVersion(); v / 10000 != CUDNN_MAJOR)
    l.error = detail::cat("cuDNN at ", l.api.path, " is version ", v / 10000, ".", v % 10000 / 100,
                          ", expected major version ", CUDNN_MAJOR);
  return l;
}

void check(cudnnStatus_t s, const char* op, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  std::string msg = detail::cat("[", op, "] ", call, " failed: ", dnn_api().cudnnGetErrorString(s),
                                " (", int(s), ")");
  if (s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    throw OutOfMemory(msg);
  throw Error(msg);
}

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// False for the statuses by which cuDNN refuses a configuration (bad or
// unsupported parameters): the own kernels run it.
bool usable(cudnnStatus_t s) { return s / 1000 != 2 && s / 1000 != 3; }

// The first of `n` results (fastest first) that this device may take, or null.
template <class Perf>
const Perf* pick(const Perf* r, int n, size_t workspace, bool deterministic, bool tf32) {
  for (int i = 0; i < n; ++i) {
    const Perf& p = r[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > workspace) continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    // Without TF32 the descriptor stays at FMA math whatever the result
    // says; with it, the result's math is set, and down-conversion below
    // TF32 (TENSOR_OP_MATH_ALLOW_CONVERSION) is never taken.
    if (p.mathType != CUDNN_FMA_MATH && p.mathType != CUDNN_DEFAULT_MATH &&
        !(tf32 && p.mathType == CUDNN_TENSOR_OP_MATH))
      continue;
    return &p;
  }
  return nullptr;
}

}  // namespace

#ifdef SY_CUDA_EMULATION
// tests/cuda_emu: cuDNN emulated on the host (cudnn_emu.cpp).
const DnnApi& sy_emu_dnn_api();
const DnnApi& dnn_api() { return sy_emu_dnn_api(); }
#else
const DnnApi& dnn_api() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) throw Error("[cuda] " + loaded.error);
  return loaded.api;
}
#endif

std::string cudnn_description() {
  const DnnApi& a = dnn_api();
  const size_t v = a.cudnnGetVersion();
  return detail::cat(v / 10000, ".", v % 10000 / 100, ".", v % 100, " (", a.path, ")");
}

Dnn::~Dnn() { release(); }

void Dnn::init(cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  const DnnApi& a = dnn_api();
  release();
  cudnnHandle_t h = nullptr;
  check(a.cudnnCreate(&h), "cuda", "cudnnCreate");
  if (cudnnStatus_t s = a.cudnnSetStream(h, stream); s != CUDNN_STATUS_SUCCESS) {
    a.cudnnDestroy(h);
    check(s, "cuda", "cudnnSetStream");
  }
  handle_ = h;
  stream_ = stream;
  workspace_ = workspace;
  workspace_bytes_ = workspace_bytes;
  deterministic_ = !env_is("SWITCHYARD_CUDNN_DETERMINISTIC", "0");
  benchmark_ = env_is("SWITCHYARD_CUDNN_BENCHMARK", "1");
}

void Dnn::destroy(Plan& p) {
  const DnnApi& a = dnn_api();
  if (p.x) a.cudnnDestroyTensorDescriptor(p.x);
  if (p.y) a.cudnnDestroyTensorDescriptor(p.y);
  if (p.w) a.cudnnDestroyFilterDescriptor(p.w);
  if (p.conv) a.cudnnDestroyConvolutionDescriptor(p.conv);
  p = Plan{};
}

void Dnn::release() {
  // Only while the CUDA runtime is up (the device's shutdown calls this
  // before it goes): statuses are ignored, nothing can be done about them.
  if (!handle_) return;
  for (auto& [k, p] : plans_) destroy(p);
  plans_.clear();
  dnn_api().cudnnDestroy(handle_);
  handle_ = nullptr;
}

Dnn::Plan& Dnn::plan(Kernel k, const Conv2dBackwardInputParams& g, void* const* args) {
  const std::array<int64_t, 14> geo = {g.batch,        g.channels,   g.height,     g.width,
                                       g.out_channels, g.groups,     g.kernel[0],  g.kernel[1],
                                       g.stride[0],    g.stride[1],  g.padding[0], g.padding[1],
                                       g.dilation[0],  g.dilation[1]};
  // The alignments of the three operands join the key: an algorithm chosen
  // for aligned buffers may need them (16-byte vector loads).
  const Key key{int(k), geo,
                alignment_of(args[0]) | alignment_of(args[1]) << 8 | alignment_of(args[2]) << 16 |
                    int(tf32_) << 24};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  // A plan is made, and its algorithm first run, outside a graph capture:
  // timing runs and synchronizes, and an algorithm's first run may load its
  // kernels or allocate (cuDNN's one-time setup), which a capture refuses.
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  SY_CUDA(kernel_name(k), cudaStreamIsCapturing(stream_, &cap));
  if (cap != cudaStreamCaptureStatusNone) throw EagerRunNeeded();
  Plan& pl = plans_[key];
  try {
    make_plan(pl, k, g, geo, args);
  } catch (...) {  // nothing half-made stays: the next launch tries again
    destroy(pl);
    plans_.erase(key);
    throw;
  }
  return pl;
}

void Dnn::make_plan(Plan& pl, Kernel k, const Conv2dBackwardInputParams& g,
                    const std::array<int64_t, 14>& geo, void* const* args) {
  const DnnApi& a = dnn_api();
  const int64_t OH = conv_out_size(g.height, g.kernel[0], g.stride[0], g.padding[0], g.dilation[0]);
  const int64_t OW = conv_out_size(g.width, g.kernel[1], g.stride[1], g.padding[1], g.dilation[1]);
  const int64_t N = g.batch, C = g.channels, OC = g.out_channels, G = g.groups;
  // Empty tensors and sizes past int (cuDNN's dimensions and strides) stay
  // with the own kernels, which take them.
  for (int64_t v : {N, C, g.height, g.width, OC, OH, OW})
    if (v <= 0 || v > kIntMax) return;
  for (int64_t v : geo)
    if (v > kIntMax) return;
  if (N * C * g.height * g.width > kIntMax || N * OC * OH * OW > kIntMax) return;
  auto setup = [&]() -> bool {  // false: cuDNN refuses this configuration
    if (a.cudnnCreateTensorDescriptor(&pl.x) || a.cudnnCreateTensorDescriptor(&pl.y) ||
        a.cudnnCreateFilterDescriptor(&pl.w) || a.cudnnCreateConvolutionDescriptor(&pl.conv))
      return false;
    if (a.cudnnSetTensor4dDescriptor(pl.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(N), int(C),
                                     int(g.height), int(g.width)) ||
        a.cudnnSetTensor4dDescriptor(pl.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(N), int(OC),
                                     int(OH), int(OW)) ||
        a.cudnnSetFilter4dDescriptor(pl.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(OC), int(C / G),
                                     int(g.kernel[0]), int(g.kernel[1])) ||
        a.cudnnSetConvolution2dDescriptor(
            pl.conv, int(g.padding[0]), int(g.padding[1]), int(g.stride[0]), int(g.stride[1]),
            int(g.dilation[0]), int(g.dilation[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ||
        a.cudnnSetConvolutionGroupCount(pl.conv, int(G)) ||
        // FMA only unless TF32 was asked for (cuDNN's default math allows
        // TF32 tensor cores on Ampere and later).
        a.cudnnSetConvolutionMathType(pl.conv, tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH))
      return false;
    int dims[4] = {};
    return a.cudnnGetConvolution2dForwardOutputDim(pl.conv, pl.x, pl.w, &dims[0], &dims[1],
                                                   &dims[2], &dims[3]) == CUDNN_STATUS_SUCCESS &&
           dims[0] == N && dims[1] == OC && dims[2] == OH && dims[3] == OW;
  };
  if (!setup()) {
    destroy(pl);
    return;
  }
  // By cuDNN's heuristics (a choice that depends only on the shape, the GPU
  // and the library: the same every run), or with SWITCHYARD_CUDNN_BENCHMARK=1
  // by timing every algorithm on this launch's buffers (cudnn.benchmark).
  // Either way outside a graph capture: plan() saw to it.
  const char* op = kernel_name(k);
  int algo = -1, math = CUDNN_FMA_MATH;
  size_t memory = 0;
  // Runs one query; false when cuDNN refuses the configuration.
  auto query = [&](auto count_fn, auto find_fn, auto get_fn, auto* perf_type, const char* find_name,
                   const char* get_name) -> bool {
    using Perf = std::remove_pointer_t<decltype(perf_type)>;
    int max = 0;
    if (!usable(count_fn(&max))) return false;
    std::vector<Perf> r(size_t(std::max(max, 1)));
    int n = 0;
    const cudnnStatus_t st =
        benchmark_ ? find_fn(r.data(), int(r.size()), &n) : get_fn(r.data(), int(r.size()), &n);
    if (!usable(st)) return false;
    check(st, op, benchmark_ ? find_name : get_name);
    if (const Perf* p = pick(r.data(), n, workspace_bytes_, deterministic_, tf32_)) {
      algo = int(p->algo);
      memory = p->memory;
      math = int(p->mathType);
    }
    return true;
  };
  bool ok = false;
  if (k == Kernel::conv2d) {
    ok = query([&](int* c) { return a.cudnnGetConvolutionForwardAlgorithmMaxCount(handle_, c); },
               [&](cudnnConvolutionFwdAlgoPerf_t* r, int req, int* n) {
                 return a.cudnnFindConvolutionForwardAlgorithmEx(
                     handle_, pl.x, args[1], pl.w, args[2], pl.conv, pl.y, args[0], req, n, r,
                     workspace_, workspace_bytes_);
               },
               [&](cudnnConvolutionFwdAlgoPerf_t* r, int req, int* n) {
                 return a.cudnnGetConvolutionForwardAlgorithm_v7(handle_, pl.x, pl.w, pl.conv, pl.y,
                                                                 req, n, r);
               },
               static_cast<cudnnConvolutionFwdAlgoPerf_t*>(nullptr),
               "cudnnFindConvolutionForwardAlgorithmEx", "cudnnGetConvolutionForwardAlgorithm_v7");
  } else if (k == Kernel::conv2d_backward_input) {
    ok = query(
        [&](int* c) { return a.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle_, c); },
        [&](cudnnConvolutionBwdDataAlgoPerf_t* r, int req, int* n) {
          return a.cudnnFindConvolutionBackwardDataAlgorithmEx(handle_, pl.w, args[2], pl.y,
                                                               args[1], pl.conv, pl.x, args[0], req,
                                                               n, r, workspace_, workspace_bytes_);
        },
        [&](cudnnConvolutionBwdDataAlgoPerf_t* r, int req, int* n) {
          return a.cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, pl.w, pl.y, pl.conv, pl.x,
                                                               req, n, r);
        },
        static_cast<cudnnConvolutionBwdDataAlgoPerf_t*>(nullptr),
        "cudnnFindConvolutionBackwardDataAlgorithmEx",
        "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  } else {
    ok = query(
        [&](int* c) { return a.cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle_, c); },
        [&](cudnnConvolutionBwdFilterAlgoPerf_t* r, int req, int* n) {
          return a.cudnnFindConvolutionBackwardFilterAlgorithmEx(
              handle_, pl.x, args[2], pl.y, args[1], pl.conv, pl.w, args[0], req, n, r, workspace_,
              workspace_bytes_);
        },
        [&](cudnnConvolutionBwdFilterAlgoPerf_t* r, int req, int* n) {
          return a.cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, pl.x, pl.y, pl.conv, pl.w,
                                                                 req, n, r);
        },
        static_cast<cudnnConvolutionBwdFilterAlgoPerf_t*>(nullptr),
        "cudnnFindConvolutionBackwardFilterAlgorithmEx",
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  }
  // Refused, nothing fits the workspace, or nothing deterministic: the own
  // kernels.
  if (!ok || algo < 0) {
    destroy(pl);
    return;
  }
  // The chosen algorithm's math (TF32 allowed only when asked for: pick()).
  if (tf32_)
    check(a.cudnnSetConvolutionMathType(pl.conv, cudnnMathType_t(math)), op,
          "cudnnSetConvolutionMathType");
  pl.algo = algo;
  pl.workspace = memory;
  pl.usable = true;
}

bool Dnn::run(const Instr& ins, void* const* args, const LaunchEnv& env) {
  if (!handle_) return false;
  const DnnApi& a = dnn_api();
  const float one = 1.f, zero = 0.f;
  tf32_ = env.tf32;  // this run's float32 matmul precision (plans are made per setting)
  const char* op = kernel_name(ins.kernel);
  // A plan's first run (eager: plan()) that cuDNN refuses leaves the shape
  // to the own kernels; later failures are errors.
  auto done = [&](Plan& pl, cudnnStatus_t st, const char* call) {
    if (!pl.ran && !usable(st)) {
      destroy(pl);
      return false;
    }
    check(st, op, call);
    pl.ran = true;
    return true;
  };
  switch (ins.kernel) {
    case Kernel::conv2d: {
      const auto& p = ins.params.get<Conv2dParams>();
      Plan& pl = plan(ins.kernel, conv_geometry<Conv2dBackwardInputParams>(p), args);
      if (!pl.usable) return false;
      if (!done(pl,
                a.cudnnConvolutionForward(handle_, &one, pl.x, args[1], pl.w, args[2], pl.conv,
                                          cudnnConvolutionFwdAlgo_t(pl.algo), workspace_,
                                          pl.workspace, &zero, pl.y, args[0]),
                "cudnnConvolutionForward"))
        return false;
      const int64_t OH =
          conv_out_size(p.height, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0]);
      const int64_t OW =
          conv_out_size(p.width, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1]);
      launch_channel_bias_act(p.batch, p.out_channels, OH * OW, static_cast<float*>(args[0]),
                              p.has_bias ? static_cast<const float*>(args[3]) : nullptr, p.act,
                              env);
      return true;
    }
    case Kernel::conv2d_backward_input: {
      Plan& pl = plan(ins.kernel, ins.params.get<Conv2dBackwardInputParams>(), args);
      if (!pl.usable) return false;
      return done(pl,
                  a.cudnnConvolutionBackwardData(handle_, &one, pl.w, args[2], pl.y, args[1],
                                                 pl.conv, cudnnConvolutionBwdDataAlgo_t(pl.algo),
                                                 workspace_, pl.workspace, &zero, pl.x, args[0]),
                  "cudnnConvolutionBackwardData");
    }
    case Kernel::conv2d_backward_weight: {
      const auto& p = ins.params.get<Conv2dBackwardWeightParams>();
      if (p.splits != 1) return false;  // partial sums over positions: the own kernel's
      Plan& pl = plan(ins.kernel, conv_geometry<Conv2dBackwardInputParams>(p), args);
      if (!pl.usable) return false;
      return done(
          pl,
          a.cudnnConvolutionBackwardFilter(handle_, &one, pl.x, args[2], pl.y, args[1], pl.conv,
                                           cudnnConvolutionBwdFilterAlgo_t(pl.algo), workspace_,
                                           pl.workspace, &zero, pl.w, args[0]),
          "cudnnConvolutionBackwardFilter");
    }
    default:
      return false;
  }
}

#endif  // SWITCHYARD_HAVE_CUDNN

}  // namespace switchyard::cuda_impl
