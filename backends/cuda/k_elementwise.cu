// SPDX-License-Identifier: MIT
// Elementwise kernels: fill, arange, cast, affine, unary, unary_backward,
// binary (with broadcasting) and the GEMM's bias+activation epilogue.
//
// Shapes: flat arrays of n elements (binary: a 4-D output `dims`, inputs
// addressed through element strides `a_strides` and `b_strides`, 0 along a
// broadcast dimension; bias_act: a
// row-major rows x cols matrix and a bias of cols).
//
// Launch geometry: 1-D grids of 256-thread blocks, one element per thread per
// iteration of a grid-stride loop; the grid is ceil(n / 256) blocks capped at
// 32 per SM, so any n (64-bit) is covered. n == 0 launches nothing.
#include "cuda_math.cuh"
#include "switchyard/dtype.h"

namespace switchyard::cuda_impl {
namespace {

template <class T>
__global__ void fill_k(T* out, int64_t n, T v) {
  SY_GRID_STRIDE(i, n) out[i] = v;
}

template <class T>
__global__ void arange_k(T* out, int64_t n, float start, float step) {
  // Rounded as on the CPU (no fused multiply-add): integer aranges truncate the same.
  SY_GRID_STRIDE(i, n) out[i] = pointwise::convert<T>(__fadd_rn(start, __fmul_rn(float(i), step)));
}

template <class To, class From>
__global__ void cast_k(To* out, const From* in, int64_t n) {
  SY_GRID_STRIDE(i, n) out[i] = pointwise::convert<To>(in[i]);
}

__global__ void affine_k(float* out, const float* in, int64_t n, float a, float b) {
  SY_GRID_STRIDE(i, n) out[i] = a * in[i] + b;
}

__global__ void unary_k(float* out, const float* in, int64_t n, Unary op) {
  SY_GRID_STRIDE(i, n) out[i] = unary_apply(op, in[i]);
}

__global__ void unary_backward_k(float* dx, const float* dy, const float* x, const float* y,
                                 int64_t n, Unary op) {
  SY_GRID_STRIDE(i, n) dx[i] = dy[i] * unary_grad(op, x[i], y[i]);
}

struct Bcast {
  int64_t d[4], sa[4], sb[4];
};

__global__ void binary_k(float* out, const float* a, const float* b, Bcast s, int64_t n,
                         Binary op) {
  SY_GRID_STRIDE(i, n) {
    int64_t i3 = i % s.d[3], r = i / s.d[3];
    int64_t i2 = r % s.d[2];
    r /= s.d[2];
    int64_t i1 = r % s.d[1], i0 = r / s.d[1];
    float x = a[i0 * s.sa[0] + i1 * s.sa[1] + i2 * s.sa[2] + i3 * s.sa[3]];
    float y = b[i0 * s.sb[0] + i1 * s.sb[1] + i2 * s.sb[2] + i3 * s.sb[3]];
    out[i] = binary_apply(op, x, y);
  }
}

__global__ void bias_act_k(float* out, const float* bias, int64_t rows, int64_t cols, Unary act) {
  SY_GRID_STRIDE(i, rows * cols) {
    float v = out[i];
    if (bias) v += bias[i % cols];
    out[i] = unary_apply(act, v);
  }
}

__global__ void bias_act_batched_k(float* out, const float* bias, int64_t rows, int64_t cols,
                                   int64_t stride, bool bias_rows, Unary act, int64_t total) {
  SY_GRID_STRIDE(i, total) {
    int64_t c = i % cols, r = i / cols % rows, b = i / (cols * rows);
    float& o = out[b * stride + r * cols + c];
    float v = o;
    if (bias) v += bias_rows ? bias[b * rows + r] : bias[c];
    o = unary_apply(act, v);
  }
}

__global__ void channel_bias_act_k(float* out, const float* bias, int64_t channels, int64_t plane,
                                   Unary act, int64_t total) {
  SY_GRID_STRIDE(i, total) {
    float v = out[i];
    if (bias) v += bias[i / plane % channels];
    out[i] = unary_apply(act, v);
  }
}

template <class T>
void fill_as(void* out, int64_t n, T v, const LaunchEnv& env) {
  SY_LAUNCH(fill_k<T>, blocks_for(n, env), kBlock, env.stream)(static_cast<T*>(out), n, v);
}

template <class T>
void arange_as(void* out, int64_t n, float start, float step, const LaunchEnv& env) {
  SY_LAUNCH(arange_k<T>, blocks_for(n, env), kBlock, env.stream)
  (static_cast<T*>(out), n, start, step);
}

}  // namespace

void launch(const FillParams& p, void* const* args, const LaunchEnv& env) {
  if (p.n <= 0) return;
  pointwise::with_element(p.dtype, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    fill_as<T>(args[0], p.n, pointwise::convert<T>(p.value), env);
  });
  SY_CUDA_LAUNCHED("fill");
}

void launch(const ArangeParams& p, void* const* args, const LaunchEnv& env) {
  if (p.n <= 0) return;
  pointwise::with_element(p.dtype, [&](auto* t) {
    arange_as<std::remove_pointer_t<decltype(t)>>(args[0], p.n, p.start, p.step, env);
  });
  SY_CUDA_LAUNCHED("arange");
}

void launch(const CastParams& p, void* const* args, const LaunchEnv& env) {
  const int64_t n = p.n;
  if (n <= 0) return;
  const unsigned g = blocks_for(n, env);
  pointwise::with_element(p.to, [&](auto* to) {
    auto* out = static_cast<std::remove_pointer_t<decltype(to)>*>(args[0]);
    pointwise::with_element(p.from, [&](auto* from) {
      auto* in = static_cast<const std::remove_pointer_t<decltype(from)>*>(args[1]);
      SY_LAUNCH(cast_k, g, kBlock, env.stream)(out, in, n);
    });
  });
  SY_CUDA_LAUNCHED("cast");
}

void launch(const AffineParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const float* in = static_cast<const float*>(args[1]);
  const int64_t n = p.n;
  if (n <= 0) return;
  SY_LAUNCH(affine_k, blocks_for(n, env), kBlock, env.stream)(out, in, n, p.scale, p.shift);
  SY_CUDA_LAUNCHED("affine");
}

void launch(const UnaryParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const float* in = static_cast<const float*>(args[1]);
  const int64_t n = p.n;
  if (n <= 0) return;
  SY_LAUNCH(unary_k, blocks_for(n, env), kBlock, env.stream)(out, in, n, p.op);
  SY_CUDA_LAUNCHED("unary");
}

void launch(const UnaryBackwardParams& p, void* const* args, const LaunchEnv& env) {
  float* dx = static_cast<float*>(args[0]);
  const float* dy = static_cast<const float*>(args[1]);
  const float* x = static_cast<const float*>(args[2]);
  const float* y = static_cast<const float*>(args[3]);
  const int64_t n = p.n;
  if (n <= 0) return;
  SY_LAUNCH(unary_backward_k, blocks_for(n, env), kBlock, env.stream)(dx, dy, x, y, n, p.op);
  SY_CUDA_LAUNCHED("unary_backward");
}

void launch(const BinaryParams& p, void* const* args, const LaunchEnv& env) {
  float* out = static_cast<float*>(args[0]);
  const float* a = static_cast<const float*>(args[1]);
  const float* b = static_cast<const float*>(args[2]);
  Bcast s;
  int64_t n = 1;
  for (int j = 0; j < 4; ++j) {
    s.d[j] = p.dims[j];
    s.sa[j] = p.a_strides[j];
    s.sb[j] = p.b_strides[j];
    n *= p.dims[j];
  }
  if (n <= 0) return;
  SY_LAUNCH(binary_k, blocks_for(n, env), kBlock, env.stream)(out, a, b, s, n, p.op);
  SY_CUDA_LAUNCHED("binary");
}

void launch_bias_act(int64_t rows, int64_t cols, float* out, const float* bias, Unary act,
                     const LaunchEnv& env) {
  if (rows * cols <= 0 || (!bias && act == Unary::none)) return;
  SY_LAUNCH(bias_act_k, blocks_for(rows * cols, env), kBlock, env.stream)
  (out, bias, rows, cols, act);
  SY_CUDA_LAUNCHED("gemm epilogue");
}

void launch_bias_act_batched(int64_t batch, int64_t rows, int64_t cols, int64_t stride, float* out,
                             const float* bias, bool bias_rows, Unary act, const LaunchEnv& env) {
  const int64_t total = batch * rows * cols;
  if (total <= 0 || (!bias && act == Unary::none)) return;
  SY_LAUNCH(bias_act_batched_k, blocks_for(total, env), kBlock, env.stream)
  (out, bias, rows, cols, stride, bias_rows, act, total);
  SY_CUDA_LAUNCHED("gemm epilogue");
}

void launch_channel_bias_act(int64_t batch, int64_t channels, int64_t plane, float* out,
                             const float* bias, Unary act, const LaunchEnv& env) {
  const int64_t total = batch * channels * plane;
  if (total <= 0 || (!bias && act == Unary::none)) return;
  SY_LAUNCH(channel_bias_act_k, blocks_for(total, env), kBlock, env.stream)
  (out, bias, channels, plane, act, total);
  SY_CUDA_LAUNCHED("conv2d epilogue");
}

}  // namespace switchyard::cuda_impl
