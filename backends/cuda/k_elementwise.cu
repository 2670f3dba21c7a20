// Elementwise kernels: fill, arange, cast, affine, unary, unary_backward,
// binary (with broadcasting) and the GEMM's bias+activation epilogue.
//
// Shapes: flat arrays of n = p.i[0] elements (binary: a 4-D output
// d0 x d1 x d2 x d3 = p.i[0..3], inputs addressed through element strides
// p.i[4..7] and p.i[8..11], 0 along a broadcast dimension; bias_act: a
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
  SY_GRID_STRIDE(i, n) out[i] = T(__fadd_rn(start, __fmul_rn(float(i), step)));
}

template <class To, class From>
__global__ void cast_k(To* out, const From* in, int64_t n) {
  SY_GRID_STRIDE(i, n) out[i] = To(in[i]);
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

__global__ void binary_k(float* out, const float* a, const float* b, Bcast s, int64_t n, Binary op) {
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

template <class T>
void fill_as(void* out, int64_t n, T v, const LaunchEnv& env) {
  SY_LAUNCH(fill_k<T>, blocks_for(n, env), kBlock, env.stream)(static_cast<T*>(out), n, v);
}

template <class T>
void arange_as(void* out, int64_t n, float start, float step, const LaunchEnv& env) {
  SY_LAUNCH(arange_k<T>, blocks_for(n, env), kBlock, env.stream)(static_cast<T*>(out), n, start, step);
}

template <class To>
void cast_from(DType from, To* out, const void* in, int64_t n, const LaunchEnv& env) {
  unsigned g = blocks_for(n, env);
  switch (from) {
    case DType::f32: SY_LAUNCH(cast_k, g, kBlock, env.stream)(out, static_cast<const float*>(in), n); break;
    case DType::i32: SY_LAUNCH(cast_k, g, kBlock, env.stream)(out, static_cast<const int32_t*>(in), n); break;
    case DType::u8: SY_LAUNCH(cast_k, g, kBlock, env.stream)(out, static_cast<const uint8_t*>(in), n); break;
  }
}

}  // namespace

void launch_fill(const KernelParams& p, void* out, const LaunchEnv& env) {
  int64_t n = p.i[0];
  if (n <= 0) return;
  switch (DType(p.i[1])) {
    case DType::f32: fill_as<float>(out, n, p.f[0], env); break;
    case DType::i32: fill_as<int32_t>(out, n, int32_t(p.f[0]), env); break;
    case DType::u8: fill_as<uint8_t>(out, n, uint8_t(p.f[0]), env); break;
  }
  SY_CUDA_LAUNCHED("fill");
}

void launch_arange(const KernelParams& p, void* out, const LaunchEnv& env) {
  int64_t n = p.i[0];
  if (n <= 0) return;
  switch (DType(p.i[1])) {
    case DType::f32: arange_as<float>(out, n, p.f[0], p.f[1], env); break;
    case DType::i32: arange_as<int32_t>(out, n, p.f[0], p.f[1], env); break;
    case DType::u8: arange_as<uint8_t>(out, n, p.f[0], p.f[1], env); break;
  }
  SY_CUDA_LAUNCHED("arange");
}

void launch_cast(const KernelParams& p, void* out, const void* in, const LaunchEnv& env) {
  int64_t n = p.i[0];
  if (n <= 0) return;
  DType from = DType(p.i[1]);
  switch (DType(p.i[2])) {
    case DType::f32: cast_from(from, static_cast<float*>(out), in, n, env); break;
    case DType::i32: cast_from(from, static_cast<int32_t*>(out), in, n, env); break;
    case DType::u8: cast_from(from, static_cast<uint8_t*>(out), in, n, env); break;
  }
  SY_CUDA_LAUNCHED("cast");
}

void launch_affine(const KernelParams& p, float* out, const float* in, const LaunchEnv& env) {
  int64_t n = p.i[0];
  if (n <= 0) return;
  SY_LAUNCH(affine_k, blocks_for(n, env), kBlock, env.stream)(out, in, n, p.f[0], p.f[1]);
  SY_CUDA_LAUNCHED("affine");
}

void launch_unary(Unary op, int64_t n, float* out, const float* in, const LaunchEnv& env) {
  if (n <= 0) return;
  SY_LAUNCH(unary_k, blocks_for(n, env), kBlock, env.stream)(out, in, n, op);
  SY_CUDA_LAUNCHED("unary");
}

void launch_unary_backward(const KernelParams& p, float* dx, const float* dy, const float* x,
                           const float* y, const LaunchEnv& env) {
  int64_t n = p.i[0];
  if (n <= 0) return;
  SY_LAUNCH(unary_backward_k, blocks_for(n, env), kBlock, env.stream)(dx, dy, x, y, n, Unary(p.op));
  SY_CUDA_LAUNCHED("unary_backward");
}

void launch_binary(const KernelParams& p, float* out, const float* a, const float* b, const LaunchEnv& env) {
  Bcast s;
  int64_t n = 1;
  for (int j = 0; j < 4; ++j) {
    s.d[j] = p.i[j];
    s.sa[j] = p.i[4 + j];
    s.sb[j] = p.i[8 + j];
    n *= p.i[j];
  }
  if (n <= 0) return;
  SY_LAUNCH(binary_k, blocks_for(n, env), kBlock, env.stream)(out, a, b, s, n, Binary(p.op));
  SY_CUDA_LAUNCHED("binary");
}

void launch_bias_act(int64_t rows, int64_t cols, float* out, const float* bias, Unary act,
                     const LaunchEnv& env) {
  if (rows * cols <= 0 || (!bias && act == Unary::none)) return;
  SY_LAUNCH(bias_act_k, blocks_for(rows * cols, env), kBlock, env.stream)(out, bias, rows, cols, act);
  SY_CUDA_LAUNCHED("gemm epilogue");
}

}  // namespace switchyard::cuda_impl
