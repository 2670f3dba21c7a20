// SPDX-License-Identifier: MIT
// GEMM for the CPU backend: CBLAS (OpenBLAS) when the build found it, else a
// portable blocked loop.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_kernels.h"
#include "thread_pool.h"

#ifdef SWITCHYARD_HAVE_CBLAS
#include <cblas.h>
#endif

namespace switchyard::cpu_impl {

const char* gemm_library() {
#ifdef SWITCHYARD_HAVE_CBLAS
  return "OpenBLAS";
#else
  return "portable";
#endif
}

namespace {
#ifndef SWITCHYARD_HAVE_CBLAS
// C += alpha * A B, A (M,K) lda, B (K,N) ldb, both non-transposed.
void gemm_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
             const float* B, int64_t ldb, float* C, int64_t ldc) {
  auto body = [&](int64_t lo, int64_t hi) {
    constexpr int64_t KB = 256, NB = 512;
    for (int64_t k0 = 0; k0 < K; k0 += KB)
      for (int64_t n0 = 0; n0 < N; n0 += NB)
        for (int64_t i = lo; i < hi; ++i) {
          float* c = C + i * ldc;
          int64_t k1 = std::min(K, k0 + KB), n1 = std::min(N, n0 + NB);
          for (int64_t k = k0; k < k1; ++k) {
            float a = alpha * A[i * lda + k];
            const float* b = B + k * ldb;
            for (int64_t j = n0; j < n1; ++j) c[j] += a * b[j];
          }
        }
  };
  body(0, M);
}

// X (rows, cols) with row stride ld, transposed into a packed (cols, rows).
std::vector<float> transposed(const float* X, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> t(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[size_t(c * rows + r)] = X[r * ld + c];
  return t;
}
#endif
}  // namespace

// One block of C: rows [r0, r1) and columns [c0, c1).
// A's and B's row strides as stored are lda and ldb.
static void gemm_block(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                       float alpha, const float* A, const float* B, const float* bias, float* C,
                       int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  int64_t m = r1 - r0, n = c1 - c0;
  for (int64_t i = r0; i < r1; ++i) {
    if (bias)
      std::memcpy(C + i * N + c0, bias + c0, size_t(n) * sizeof(float));
    else
      std::memset(C + i * N + c0, 0, size_t(n) * sizeof(float));
  }
  if (K == 0 || m == 0 || n == 0) return;
#ifdef SWITCHYARD_HAVE_CBLAS
  (void)M;                                      // the strides say it all
  const float* a = ta ? A + r0 : A + r0 * lda;  // op(A) rows r0..r1
  const float* b = tb ? B + c0 * ldb : B + c0;  // op(B) columns c0..c1
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m),
              int(n), int(K), alpha, a, int(lda), b, int(ldb), 1.f, C + r0 * N + c0, int(N));
#else
  std::vector<float> at, bt;
  if (ta) at = transposed(A, K, M, lda), A = at.data(), lda = K;
  if (tb) bt = transposed(B, N, K, ldb), B = bt.data(), ldb = N;
  gemm_nn(m, n, K, alpha, A + r0 * lda, lda, B + c0, ldb, C + r0 * N + c0, N);
#endif
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, float alpha,
          const float* A, const float* B, const float* bias, float* C) {
  if (M == 0 || N == 0) return;
  if (lda == 0) lda = ta ? M : K;  // packed
  if (ldb == 0) ldb = tb ? K : N;
#ifdef SWITCHYARD_HAVE_CBLAS
  // Our pool splits GEMMs itself: OpenBLAS's own threads would spin against
  // the pool's between the many small ops of a training step.
  static const bool single = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single;
#endif
  int threads = pool().active();
  if (threads == 1 || M * N * std::max<int64_t>(K, 1) < kGemmSerialWork) {
    gemm_block(ta, tb, M, N, K, lda, ldb, alpha, A, B, bias, C, 0, M, 0, N);
    return;
  }
  // Split the larger output dimension, in multiples of 16.
  bool by_rows = M >= N;
  int64_t dim = by_rows ? M : N;
  int64_t grain = std::max<int64_t>(16, (dim / threads + 15) / 16 * 16);
  pool().parallel_for(dim, grain, [&](int64_t lo, int64_t hi) {
    if (by_rows)
      gemm_block(ta, tb, M, N, K, lda, ldb, alpha, A, B, bias, C, lo, hi, 0, N);
    else
      gemm_block(ta, tb, M, N, K, lda, ldb, alpha, A, B, bias, C, 0, M, lo, hi);
  });
}

}  // namespace switchyard::cpu_impl
