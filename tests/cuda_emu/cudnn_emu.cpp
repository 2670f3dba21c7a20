// SPDX-License-Identifier: MIT
// cuDNN emulated on the host for tests/cuda_emu: the v7 convolution entry
// points the backend uses (cuda_dnn.cpp), with their real signatures,
// computing in double. Stricter than the library where the backend must
// not rely on it: descriptors are checked against each other and against
// the output size cuDNN computes, the handle's stream must be the device's,
// each call's workspace must cover its algorithm's, timing an algorithm
// (Find...Ex) runs the stream to completion, so it fails inside a graph
// capture and leaves garbage in the output it was given, and an
// algorithm's first run fails inside a capture (the real library may load
// kernels or allocate then). Timing reports an algorithm whose workspace
// does not fit with a failed status, as the library does. Each direction
// offers a few algorithms with made-up times: the fastest needs more
// workspace than any device gives, one is nondeterministic, and one uses
// TF32 tensor cores (offered only when the descriptor allows TF32), so the
// backend's choice among them is tested (the TF32 one of the backward
// filter is labelled DEFAULT_MATH, which TF32-capable results may be). Work is enqueued on the
// emulated stream, so it is recorded into graphs like everything else.
#if SWITCHYARD_HAVE_CUDNN
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <vector>

#include "cuda_dnn.h"
#include "cuda_runtime_api.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  int n = 0, c = 0, h = 0, w = 0;
  bool set = false;
};
struct cudnnFilterStruct {
  int k = 0, c = 0, h = 0, w = 0;
  bool set = false;
};
struct cudnnConvolutionStruct {
  int pad[2] = {}, stride[2] = {}, dil[2] = {};
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  bool set = false;
};

namespace switchyard::cuda_impl {
namespace {

enum Direction { kForward, kBackwardData, kBackwardFilter };

// One offered algorithm: its id, made-up time, workspace, determinism and
// whether it reads the inputs as TF32.
struct Algo {
  int id;
  float ms;
  size_t memory;
  bool deterministic, tf32;
};
constexpr size_t kHuge = size_t(1) << 40;
const std::vector<Algo>& algos(Direction d) {
  static const std::vector<Algo> fwd = {{6, 0.2f, kHuge, true, false},
                                        {7, 0.5f, 0, true, true},
                                        {1, 1.0f, 1024, true, false},
                                        {0, 2.0f, 0, true, false}};
  static const std::vector<Algo> data = {
      {5, 0.2f, kHuge, true, false}, {0, 0.5f, 0, false, false}, {1, 1.0f, 4096, true, false}};
  static const std::vector<Algo> filter = {
      {3, 0.4f, 2048, false, false}, {5, 0.6f, 0, true, true}, {1, 0.9f, 8192, true, false}};
  // (Fixed times: a real library's vary run to run, which is why timing
  // is opt-in, SWITCHYARD_CUDNN_BENCHMARK=1.)
  return d == kForward ? fwd : d == kBackwardData ? data : filter;
}
const Algo* find_algo(Direction d, int id) {
  for (const Algo& a : algos(d))
    if (a.id == id) return &a;
  return nullptr;
}

cudnnStatus_t create(cudnnHandle_t* h) {
  *h = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t destroy(cudnnHandle_t h) {
  delete h;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t set_stream(cudnnHandle_t h, cudaStream_t s) {
  h->stream = s;
  return CUDNN_STATUS_SUCCESS;
}
size_t version() { return size_t(CUDNN_MAJOR) * 10000 + 1900; }
const char* error_string(cudnnStatus_t s) {
  switch (s) {
    case CUDNN_STATUS_SUCCESS:
      return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM:
      return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH:
      return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT:
      return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_NOT_SUPPORTED:
      return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDART:
      return "CUDNN_STATUS_EXECUTION_FAILED_CUDART";
    default:
      return "CUDNN_STATUS_(emulated)";
  }
}

template <class T>
cudnnStatus_t make(T** p) {
  *p = new T;
  return CUDNN_STATUS_SUCCESS;
}
template <class T>
cudnnStatus_t drop(T* p) {
  delete p;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t set_tensor(cudnnTensorDescriptor_t t, cudnnTensorFormat_t format,
                         cudnnDataType_t type, int n, int c, int h, int w) {
  if (format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *t = {n, c, h, w, true};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t set_filter(cudnnFilterDescriptor_t f, cudnnDataType_t type,
                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  if (format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *f = {k, c, h, w, true};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t set_conv(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                       int dil_h, int dil_w, cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dil_h <= 0 || dil_w <= 0)
    return CUDNN_STATUS_BAD_PARAM;
  // Switchyard's convolutions are cross-correlations (as PyTorch's), in f32.
  if (mode != CUDNN_CROSS_CORRELATION || compute != CUDNN_DATA_FLOAT)
    return CUDNN_STATUS_NOT_SUPPORTED;
  d->pad[0] = pad_h, d->pad[1] = pad_w, d->stride[0] = u, d->stride[1] = v;
  d->dil[0] = dil_h, d->dil[1] = dil_w;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t set_groups(cudnnConvolutionDescriptor_t d, int g) {
  if (g < 1) return CUDNN_STATUS_BAD_PARAM;
  d->groups = g;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t set_math(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) {
  d->math = m;
  return CUDNN_STATUS_SUCCESS;
}

int out_size(int in, int k, int s, int p, int d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

cudnnStatus_t output_dim(cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t x,
                         cudnnFilterDescriptor_t w, int* n, int* ch, int* h, int* wd) {
  if (!c->set || !x->set || !w->set) return CUDNN_STATUS_BAD_PARAM;
  if (x->c != w->c * c->groups || w->k % c->groups) return CUDNN_STATUS_BAD_PARAM;
  *n = x->n;
  *ch = w->k;
  *h = out_size(x->h, w->h, c->stride[0], c->pad[0], c->dil[0]);
  *wd = out_size(x->w, w->w, c->stride[1], c->pad[1], c->dil[1]);
  return *h > 0 && *wd > 0 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

// The descriptors agree with each other (y is the convolution's output).
bool consistent(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y) {
  int n, ch, h, wd;
  return output_dim(c, x, w, &n, &ch, &h, &wd) == CUDNN_STATUS_SUCCESS && y->set && y->n == n &&
         y->c == ch && y->h == h && y->w == wd;
}

// The direction's algorithms, fastest first, as cuDNN reports them: TF32
// ones only where the descriptor's math allows them.
// (`workspace`: the bytes a timing was given; SIZE_MAX for heuristics,
// which report every algorithm with its workspace.)
template <class Perf>
void report(Direction d, cudnnConvolutionDescriptor_t c, int requested, int* returned, Perf* r,
            size_t workspace) {
  int n = 0;
  for (const Algo& a : algos(d)) {
    if (n >= requested) break;
    if (a.tf32 && c->math == CUDNN_FMA_MATH) continue;
    Perf p{};
    p.algo = decltype(p.algo)(a.id);
    p.status = a.memory <= workspace ? CUDNN_STATUS_SUCCESS
                                     : CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
    p.time = a.ms;
    p.memory = a.memory;
    p.determinism = a.deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    p.mathType = !a.tf32                ? CUDNN_FMA_MATH
                 : d == kBackwardFilter ? CUDNN_DEFAULT_MATH
                                        : CUDNN_TENSOR_OP_MATH;
    r[n++] = p;
  }
  *returned = n;
}
cudnnStatus_t max_count(cudnnHandle_t, int* count) {
  // As many as the most any direction offers: the backend must ask for as
  // many as this says (fewer would drop the slowest).
  *count = 4;
  return CUDNN_STATUS_SUCCESS;
}

// The (direction, algorithm, shape)s run outside a capture so far: their
// one-time setup is done (per shape: runtime-compiled engines are).
std::mutex used_mu;
std::set<std::vector<int>> used;

// Geometry of one call, copied for the enqueued work.
struct Geo {
  int N, C, H, W, K, Cg, KH, KW, OH, OW, G, pad[2], stride[2], dil[2];
};
Geo geo(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
        cudnnTensorDescriptor_t y) {
  return Geo{x->n,
             x->c,
             x->h,
             x->w,
             w->k,
             w->c,
             w->h,
             w->w,
             y->h,
             y->w,
             c->groups,
             {c->pad[0], c->pad[1]},
             {c->stride[0], c->stride[1]},
             {c->dil[0], c->dil[1]}};
}

// Visits every tap of the convolution a row at a time: f(y row, x row, w
// index, ow0, ow1), where output columns [ow0, ow1) of the y row read x row
// column ow * stride - pad + kw * dilation (all inside the row). Rows make
// the inner loops contiguous in y (this emulation runs the CNN's tests).
template <class F>
void each_tap_row(const Geo& g, F f) {
  const int Kg = g.K / g.G;
  for (int n = 0; n < g.N; ++n)
    for (int k = 0; k < g.K; ++k) {
      const int grp = k / Kg;
      for (int c = 0; c < g.Cg; ++c)
        for (int kh = 0; kh < g.KH; ++kh)
          for (int kw = 0; kw < g.KW; ++kw) {
            const size_t wi = ((size_t(k) * g.Cg + c) * g.KH + kh) * g.KW + kw;
            // ow * s - p + kw * d in [0, W): ow in [ow0, ow1)
            const int off = kw * g.dil[1] - g.pad[1], s = g.stride[1];
            const int ow0 = off >= 0 ? 0 : (-off + s - 1) / s;
            const int ow1 = std::min(g.OW, g.W - off <= 0 ? 0 : (g.W - off - 1) / s + 1);
            if (ow0 >= ow1) continue;
            for (int oh = 0; oh < g.OH; ++oh) {
              const int ih = oh * g.stride[0] - g.pad[0] + kh * g.dil[0];
              if (ih < 0 || ih >= g.H) continue;
              const size_t yr = ((size_t(n) * g.K + k) * g.OH + oh) * g.OW;
              const size_t xr = ((size_t(n) * g.C + size_t(grp) * g.Cg + c) * g.H + ih) * g.W;
              f(yr, xr + size_t(off), wi, ow0, ow1);
            }
          }
    }
}

// out = the direction's result, summed in double (inputs as TF32 for a
// tensor-core algorithm).
void compute(Direction d, const Geo& g, bool tf32, const float* a, const float* b, float* out) {
  const size_t xs = size_t(g.N) * g.C * g.H * g.W, ws = size_t(g.K) * g.Cg * g.KH * g.KW,
               ys = size_t(g.N) * g.K * g.OH * g.OW;
  // a and b: (x, w) forward, (dy, w) backward data, (x, dy) backward filter.
  const size_t na = d == kBackwardData ? ys : xs, nb = d == kBackwardFilter ? ys : ws;
  std::vector<double> A(a, a + na), B(b, b + nb);
  if (tf32)
    for (auto* v : {&A, &B})
      for (double& x : *v) x = sy_emu::to_tf32(float(x));
  std::vector<double> acc(d == kForward ? ys : d == kBackwardData ? xs : ws, 0.0);
  const size_t s = size_t(g.stride[1]);
  // (x row + off: column ow reads [ow * s].)
  if (d == kForward)
    each_tap_row(g, [&](size_t yr, size_t xr, size_t wi, int ow0, int ow1) {
      const double w = B[wi];
      for (int ow = ow0; ow < ow1; ++ow) acc[yr + size_t(ow)] += A[xr + size_t(ow) * s] * w;
    });
  else if (d == kBackwardData)
    each_tap_row(g, [&](size_t yr, size_t xr, size_t wi, int ow0, int ow1) {
      const double w = B[wi];
      for (int ow = ow0; ow < ow1; ++ow) acc[xr + size_t(ow) * s] += A[yr + size_t(ow)] * w;
    });
  else
    each_tap_row(g, [&](size_t yr, size_t xr, size_t wi, int ow0, int ow1) {
      double t = 0;
      for (int ow = ow0; ow < ow1; ++ow) t += B[yr + size_t(ow)] * A[xr + size_t(ow) * s];
      acc[wi] += t;
    });
  for (size_t i = 0; i < acc.size(); ++i) out[i] = float(acc[i]);
}

// Checks shared by the execution calls; then the work is enqueued.
cudnnStatus_t execute(Direction d, cudnnHandle_t h, const void* alpha, const void* beta,
                      cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                      cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int algo,
                      size_t workspace, const void* a, const void* b, void* out) {
  if (h->stream != sy_emu::device_stream) return CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH;
  if (!consistent(x, w, c, y)) return CUDNN_STATUS_BAD_PARAM;
  const Algo* al = find_algo(d, algo);
  if (!al || (al->tf32 && c->math == CUDNN_FMA_MATH)) return CUDNN_STATUS_NOT_SUPPORTED;
  if (workspace < al->memory) return CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT;
  // The backend asks for out = op(inputs), nothing blended.
  if (*static_cast<const float*>(alpha) != 1.f || *static_cast<const float*>(beta) != 0.f)
    return CUDNN_STATUS_NOT_SUPPORTED;
  const Geo g = geo(x, w, c, y);
  {
    const std::vector<int> key = {d,        algo,        g.N,         g.C,      g.H,     g.W,
                                  g.K,      g.Cg,        g.KH,        g.KW,     g.G,     g.pad[0],
                                  g.pad[1], g.stride[0], g.stride[1], g.dil[0], g.dil[1]};
    std::lock_guard lock(used_mu);
    if (!used.count(key)) {
      if (sy_emu::refused_in_capture()) return CUDNN_STATUS_EXECUTION_FAILED_CUDART;
      used.insert(key);
    }
  }
  const bool tf32 = al->tf32;
  auto* af = static_cast<const float*>(a);
  auto* bf = static_cast<const float*>(b);
  auto* of = static_cast<float*>(out);
  sy_emu::enqueue([=] { compute(d, g, tf32, af, bf, of); }, sy_emu::kKernelNode);
  ++sy_emu::cudnn_runs[d];
  sy_emu::cudnn_last_algo[d] = algo;
  return CUDNN_STATUS_SUCCESS;
}

// Find...Ex: runs the stream to completion (refused inside a capture, as
// the synchronization it makes), and leaves `out` as garbage.
template <class Perf>
cudnnStatus_t find(Direction d, cudnnHandle_t h, cudnnTensorDescriptor_t x,
                   cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                   cudnnTensorDescriptor_t y, void* out, size_t out_elems, int requested,
                   int* returned, Perf* r, void* ws, size_t ws_bytes) {
  if (sy_emu::refused_in_capture()) return CUDNN_STATUS_EXECUTION_FAILED_CUDART;
  if (h->stream != sy_emu::device_stream) return CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH;
  if (!consistent(x, w, c, y) || requested < 1 || (ws_bytes && !ws)) return CUDNN_STATUS_BAD_PARAM;
  sy_emu::drain();
  ++sy_emu::cudnn_timed_queries;
  float* o = static_cast<float*>(out);
  for (size_t i = 0; i < out_elems; ++i) o[i] = std::numeric_limits<float>::quiet_NaN();
  report(d, c, requested, returned, r, ws_bytes);
  return CUDNN_STATUS_SUCCESS;
}

size_t elems(cudnnTensorDescriptor_t t) { return size_t(t->n) * t->c * t->h * t->w; }
size_t elems(cudnnFilterDescriptor_t f) { return size_t(f->k) * f->c * f->h * f->w; }

cudnnStatus_t find_fwd(cudnnHandle_t h, cudnnTensorDescriptor_t x, const void*,
                       cudnnFilterDescriptor_t w, const void*, cudnnConvolutionDescriptor_t c,
                       cudnnTensorDescriptor_t y, void* out, int req, int* ret,
                       cudnnConvolutionFwdAlgoPerf_t* r, void* ws, size_t wsb) {
  return find(kForward, h, x, w, c, y, out, elems(y), req, ret, r, ws, wsb);
}
cudnnStatus_t find_data(cudnnHandle_t h, cudnnFilterDescriptor_t w, const void*,
                        cudnnTensorDescriptor_t dy, const void*, cudnnConvolutionDescriptor_t c,
                        cudnnTensorDescriptor_t dx, void* out, int req, int* ret,
                        cudnnConvolutionBwdDataAlgoPerf_t* r, void* ws, size_t wsb) {
  return find(kBackwardData, h, dx, w, c, dy, out, elems(dx), req, ret, r, ws, wsb);
}
cudnnStatus_t find_filter(cudnnHandle_t h, cudnnTensorDescriptor_t x, const void*,
                          cudnnTensorDescriptor_t dy, const void*, cudnnConvolutionDescriptor_t c,
                          cudnnFilterDescriptor_t dw, void* out, int req, int* ret,
                          cudnnConvolutionBwdFilterAlgoPerf_t* r, void* ws, size_t wsb) {
  return find(kBackwardFilter, h, x, dw, c, dy, out, elems(dw), req, ret, r, ws, wsb);
}

// Get..._v7: heuristics, nothing runs (allowed inside a capture).
template <class Perf>
cudnnStatus_t heuristic(Direction d, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                        cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int req,
                        int* ret, Perf* r) {
  if (!consistent(x, w, c, y) || req < 1) return CUDNN_STATUS_BAD_PARAM;
  ++sy_emu::cudnn_heuristic_queries;
  report(d, c, req, ret, r, SIZE_MAX);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t get_fwd(cudnnHandle_t, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                      cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int req, int* ret,
                      cudnnConvolutionFwdAlgoPerf_t* r) {
  return heuristic(kForward, x, w, c, y, req, ret, r);
}
cudnnStatus_t get_data(cudnnHandle_t, cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy,
                       cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx, int req,
                       int* ret, cudnnConvolutionBwdDataAlgoPerf_t* r) {
  return heuristic(kBackwardData, dx, w, c, dy, req, ret, r);
}
cudnnStatus_t get_filter(cudnnHandle_t, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy,
                         cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw, int req,
                         int* ret, cudnnConvolutionBwdFilterAlgoPerf_t* r) {
  return heuristic(kBackwardFilter, x, dw, c, dy, req, ret, r);
}

cudnnStatus_t forward(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t x, const void* xp,
                      cudnnFilterDescriptor_t w, const void* wp, cudnnConvolutionDescriptor_t c,
                      cudnnConvolutionFwdAlgo_t algo, void*, size_t wsb, const void* beta,
                      cudnnTensorDescriptor_t y, void* yp) {
  return execute(kForward, h, alpha, beta, x, w, c, y, int(algo), wsb, xp, wp, yp);
}
cudnnStatus_t backward_data(cudnnHandle_t h, const void* alpha, cudnnFilterDescriptor_t w,
                            const void* wp, cudnnTensorDescriptor_t dy, const void* dyp,
                            cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdDataAlgo_t algo,
                            void*, size_t wsb, const void* beta, cudnnTensorDescriptor_t dx,
                            void* dxp) {
  return execute(kBackwardData, h, alpha, beta, dx, w, c, dy, int(algo), wsb, dyp, wp, dxp);
}
cudnnStatus_t backward_filter(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t x,
                              const void* xp, cudnnTensorDescriptor_t dy, const void* dyp,
                              cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdFilterAlgo_t algo,
                              void*, size_t wsb, const void* beta, cudnnFilterDescriptor_t dw,
                              void* dwp) {
  return execute(kBackwardFilter, h, alpha, beta, x, dw, c, dy, int(algo), wsb, xp, dyp, dwp);
}

}  // namespace

const DnnApi& sy_emu_dnn_api() {
  static const DnnApi api = [] {
    DnnApi a;
    a.path = "(emulated)";
    a.cudnnGetVersion = version;
    a.cudnnGetErrorString = error_string;
    a.cudnnCreate = create;
    a.cudnnDestroy = destroy;
    a.cudnnSetStream = set_stream;
    a.cudnnCreateTensorDescriptor = make<cudnnTensorStruct>;
    a.cudnnSetTensor4dDescriptor = set_tensor;
    a.cudnnDestroyTensorDescriptor = drop<cudnnTensorStruct>;
    a.cudnnCreateFilterDescriptor = make<cudnnFilterStruct>;
    a.cudnnSetFilter4dDescriptor = set_filter;
    a.cudnnDestroyFilterDescriptor = drop<cudnnFilterStruct>;
    a.cudnnCreateConvolutionDescriptor = make<cudnnConvolutionStruct>;
    a.cudnnSetConvolution2dDescriptor = set_conv;
    a.cudnnSetConvolutionGroupCount = set_groups;
    a.cudnnSetConvolutionMathType = set_math;
    a.cudnnDestroyConvolutionDescriptor = drop<cudnnConvolutionStruct>;
    a.cudnnGetConvolution2dForwardOutputDim = output_dim;
    a.cudnnGetConvolutionForwardAlgorithmMaxCount = max_count;
    a.cudnnGetConvolutionBackwardDataAlgorithmMaxCount = max_count;
    a.cudnnGetConvolutionBackwardFilterAlgorithmMaxCount = max_count;
    a.cudnnFindConvolutionForwardAlgorithmEx = find_fwd;
    a.cudnnGetConvolutionForwardAlgorithm_v7 = get_fwd;
    a.cudnnConvolutionForward = forward;
    a.cudnnFindConvolutionBackwardDataAlgorithmEx = find_data;
    a.cudnnGetConvolutionBackwardDataAlgorithm_v7 = get_data;
    a.cudnnConvolutionBackwardData = backward_data;
    a.cudnnFindConvolutionBackwardFilterAlgorithmEx = find_filter;
    a.cudnnGetConvolutionBackwardFilterAlgorithm_v7 = get_filter;
    a.cudnnConvolutionBackwardFilter = backward_filter;
    return a;
  }();
  return api;
}

}  // namespace switchyard::cuda_impl
#endif  // SWITCHYARD_HAVE_CUDNN
