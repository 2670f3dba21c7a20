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
             const float* B, int64_t ldb, float* C) {
  pool().parallel_for(M, 8, [&](int64_t lo, int64_t hi) {
    constexpr int64_t KB = 256, NB = 512;
    for (int64_t k0 = 0; k0 < K; k0 += KB)
      for (int64_t n0 = 0; n0 < N; n0 += NB)
        for (int64_t i = lo; i < hi; ++i) {
          float* c = C + i * N;
          int64_t k1 = std::min(K, k0 + KB), n1 = std::min(N, n0 + NB);
          for (int64_t k = k0; k < k1; ++k) {
            float a = alpha * A[i * lda + k];
            const float* b = B + k * ldb;
            for (int64_t j = n0; j < n1; ++j) c[j] += a * b[j];
          }
        }
  });
}

std::vector<float> transposed(const float* X, int64_t rows, int64_t cols) {
  std::vector<float> t(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[size_t(c * rows + r)] = X[r * cols + c];
  return t;
}
#endif
}  // namespace

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          const float* B, const float* bias, float* C) {
  if (M == 0 || N == 0) return;
  if (bias)
    for (int64_t i = 0; i < M; ++i) std::memcpy(C + i * N, bias, size_t(N) * sizeof(float));
  else
    std::memset(C, 0, size_t(M * N) * sizeof(float));
  if (K == 0) return;
#ifdef SWITCHYARD_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              int(M), int(N), int(K), alpha, A, int(ta ? M : K), B, int(tb ? K : N), 1.f, C,
              int(N));
#else
  std::vector<float> at, bt;
  if (ta) at = transposed(A, K, M), A = at.data();
  if (tb) bt = transposed(B, N, K), B = bt.data();
  gemm_nn(M, N, K, alpha, A, K, B, N, C);
#endif
}

}  // namespace switchyard::cpu_impl
