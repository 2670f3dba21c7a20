// SPDX-License-Identifier: MIT
// cuBLAS and cuBLASLt, emulated on the host for tests/cuda_emu: the entry
// points the backend's GEMM uses, with their real signatures, computing in
// double. They check what the backend passes (layouts against the operation's
// shape, leading dimensions, epilogues), so the row-major to column-major
// mapping in cuda_blas.cpp is exercised. Work is enqueued on the emulated
// stream, so it is recorded into graphs like everything else. A and B may be
// f32, bf16 or f16 (cuBLAS's mixed-precision row: C and D f32, compute
// 32F); TF32 comes from the compute type, or from the TF32 math mode for
// CUBLAS_COMPUTE_32F, as cuBLAS documents.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_blas.h"
#include "cuda_runtime_api.h"
#include "pointwise.h"

namespace switchyard::cuda_impl {
namespace {

// Descriptor fields, kept in the opaque structs' storage.
enum { kTransA, kTransB, kEpilogue, kBias, kCompute };
enum { kRows, kCols, kLd, kType };
// Preference and algorithm: the minimum alignments of A, B, C, D (bytes).
// Unset, cuBLASLt assumes 256: a backend that does not state them gets
// algorithms that fault on less aligned pointers.
enum { kAlignA, kAlignB, kAlignC, kAlignD, kWorkspace };

cudaStream_t blas_stream = nullptr;  // cublasSetStream's

template <class T>
uint64_t* fields(T* opaque) {
  return opaque->data;
}

cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;  // cublasSetMathMode's

float* at(const void* base, uint64_t ld, uint64_t i, uint64_t j) {  // column-major element (i, j)
  return const_cast<float*>(static_cast<const float*>(base)) + i + j * ld;
}

// A matrix operand: its address and element type.
struct Operand {
  const void* p;
  cudaDataType type;
  // Column-major element (i, j), widened to f32.
  float get(uint64_t ld, uint64_t i, uint64_t j) const {
    const uint64_t e = i + j * ld;
    if (type == CUDA_R_32F) return static_cast<const float*>(p)[e];
    const uint16_t h = static_cast<const uint16_t*>(p)[e];
    return type == CUDA_R_16BF ? pointwise::bf16_to_float(h) : pointwise::f16_to_float(h);
  }
};

bool operand_type(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16BF || t == CUDA_R_16F; }
size_t type_bytes(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

// D (m x n) = alpha op(A) op(B) (+ bias per row) (relu), column-major.
void matmul(bool ta, bool tb, uint64_t m, uint64_t n, uint64_t k, float alpha, Operand A,
            uint64_t lda, Operand B, uint64_t ldb, float* D, uint64_t ldd, const float* bias,
            bool relu, bool tf32) {
  // op(A)'s rows and op(B)'s columns copied contiguous first: the dot
  // products then stream (strided reads made this most of the CNN tests'
  // time).
  std::vector<float> rows(m * k), cols(n * k);
  for (uint64_t i = 0; i < m; ++i)
    for (uint64_t l = 0; l < k; ++l) rows[i * k + l] = ta ? A.get(lda, l, i) : A.get(lda, i, l);
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t l = 0; l < k; ++l) cols[j * k + l] = tb ? B.get(ldb, j, l) : B.get(ldb, l, j);
  if (tf32)  // tensor cores read the inputs as TF32: 10 mantissa bits
    for (auto* v : {&rows, &cols})
      for (float& x : *v) x = sy_emu::to_tf32(x);
  std::vector<float> out(m * n);
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) {
      const float* r = rows.data() + i * k;  // (data(): k may be 0)
      const float* c = cols.data() + j * k;
      double s4[4] = {0, 0, 0, 0};  // four chains: not bound by the add's latency
      uint64_t l = 0;
      for (; l + 4 <= k; l += 4)
        for (int q = 0; q < 4; ++q) s4[q] += double(r[l + q]) * c[l + q];
      for (; l < k; ++l) s4[0] += double(r[l]) * c[l];
      const double s = (s4[0] + s4[1]) + (s4[2] + s4[3]);
      float v = float(alpha * s);
      if (bias) v += bias[i];
      if (relu) v = v > 0.f ? v : 0.f;
      out[i + j * m] = v;
    }
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) *at(D, ldd, i, j) = out[i + j * m];
}

cublasStatus_t lt_create(cublasLtHandle_t* h) {
  static char tag;
  *h = reinterpret_cast<cublasLtHandle_t>(&tag);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t lt_destroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
size_t lt_version() { return 130100; }
cublasStatus_t desc_create(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                           cudaDataType_t scale) {
  if ((compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32) ||
      scale != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *d = new cublasLtMatmulDescOpaque_t{};
  fields(*d)[kEpilogue] = CUBLASLT_EPILOGUE_DEFAULT;
  fields(*d)[kCompute] = compute;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t desc_destroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t desc_set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                        const void* buf, size_t n) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      if (n != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
      cublasOperation_t op;
      std::memcpy(&op, buf, n);
      fields(d)[attr == CUBLASLT_MATMUL_DESC_TRANSA ? kTransA : kTransB] = op == CUBLAS_OP_T;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      if (n != sizeof(cublasLtEpilogue_t)) return CUBLAS_STATUS_INVALID_VALUE;
      cublasLtEpilogue_t e;
      std::memcpy(&e, buf, n);
      fields(d)[kEpilogue] = e;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: {
      if (n != sizeof(void*)) return CUBLAS_STATUS_INVALID_VALUE;
      std::memcpy(&fields(d)[kBias], buf, n);
      return CUBLAS_STATUS_SUCCESS;
    }
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}
cublasStatus_t layout_create(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows,
                             uint64_t cols, int64_t ld) {
  if (!operand_type(type) || ld < int64_t(rows) || ld < 1) return CUBLAS_STATUS_INVALID_VALUE;
  *l = new cublasLtMatrixLayoutOpaque_t{};
  fields(*l)[kRows] = rows;
  fields(*l)[kCols] = cols;
  fields(*l)[kLd] = uint64_t(ld);
  fields(*l)[kType] = type;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t layout_destroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t pref_create(cublasLtMatmulPreference_t* p) {
  *p = new cublasLtMatmulPreferenceOpaque_t{};
  for (int j : {kAlignA, kAlignB, kAlignC, kAlignD}) fields(*p)[j] = 256;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t pref_destroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t pref_set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
                        const void* buf, size_t n) {
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: {
      if (n != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
      std::memcpy(&fields(p)[kWorkspace], buf, n);
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
      if (n != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
      uint32_t a;
      std::memcpy(&a, buf, n);
      fields(p)[kAlignA + (attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES)] = a;
      return CUBLAS_STATUS_SUCCESS;
    }
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// The operation's shape from the layouts, or false when they disagree.
bool shape(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
           cublasLtMatrixLayout_t c, uint64_t& m, uint64_t& n, uint64_t& k) {
  bool ta = fields(d)[kTransA], tb = fields(d)[kTransB];
  m = fields(c)[kRows];
  n = fields(c)[kCols];
  k = ta ? fields(a)[kRows] : fields(a)[kCols];
  uint64_t am = ta ? fields(a)[kCols] : fields(a)[kRows];
  uint64_t bk = tb ? fields(b)[kCols] : fields(b)[kRows],
           bn = tb ? fields(b)[kRows] : fields(b)[kCols];
  return am == m && bk == k && bn == n;
}

cublasStatus_t heuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                         cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t,
                         cublasLtMatmulPreference_t pref, int requested,
                         cublasLtMatmulHeuristicResult_t results[], int* found) {
  uint64_t m, n, k;
  if (requested < 1 || !shape(d, a, b, c, m, n, k)) return CUBLAS_STATUS_INVALID_VALUE;
  // The supported rows used: A and B of one type, C and D f32, and TF32
  // only for f32 operands.
  if (fields(a)[kType] != fields(b)[kType] || fields(c)[kType] != CUDA_R_32F ||
      (fields(d)[kCompute] == CUBLAS_COMPUTE_32F_FAST_TF32 && fields(a)[kType] != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (const char* e = std::getenv("SY_EMU_LT_NO_ALGO"); e && std::string(e) == "1") {
    *found = 0;  // as cuBLASLt does for shapes it has no kernel for: the backend must fall back
    return CUBLAS_STATUS_SUCCESS;
  }
  results[0] = {};
  for (int j : {kAlignA, kAlignB, kAlignC, kAlignD}) results[0].algo.data[j] = fields(pref)[j];
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t lt_matmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void* alpha, const void* A,
                         cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b,
                         const void* beta, const void* C, cublasLtMatrixLayout_t c, void* D,
                         cublasLtMatrixLayout_t dl, const cublasLtMatmulAlgo_t* algo, void*, size_t,
                         cudaStream_t stream) {
  uint64_t m, n, k;
  if (stream != sy_emu::device_stream) return CUBLAS_STATUS_INVALID_VALUE;
  // The algorithm was chosen for the alignments the preference stated.
  auto misaligned = [](const void* p, uint64_t a) {
    return a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0;
  };
  if (!algo || misaligned(A, algo->data[kAlignA]) || misaligned(B, algo->data[kAlignB]) ||
      misaligned(C, algo->data[kAlignC]) || misaligned(D, algo->data[kAlignD]))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!shape(d, a, b, dl, m, n, k) || *static_cast<const float*>(beta) != 0.f || C != D ||
      fields(c)[kLd] != fields(dl)[kLd])
    return CUBLAS_STATUS_INVALID_VALUE;
  uint64_t epi = fields(d)[kEpilogue];
  bool has_bias = epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_RELU_BIAS;
  bool relu = epi == CUBLASLT_EPILOGUE_RELU || epi == CUBLASLT_EPILOGUE_RELU_BIAS;
  if (!has_bias && !relu && epi != CUBLASLT_EPILOGUE_DEFAULT) return CUBLAS_STATUS_NOT_SUPPORTED;
  const float* bias = nullptr;
  if (has_bias) {
    std::memcpy(&bias, &fields(d)[kBias], sizeof(bias));
    // The epilogue's bias is read with 16-byte loads (strict, as some kernels are).
    if (!bias || reinterpret_cast<uintptr_t>(bias) % 16) return CUBLAS_STATUS_INVALID_VALUE;
  }
  bool ta = fields(d)[kTransA], tb = fields(d)[kTransB];
  float al = *static_cast<const float*>(alpha);
  uint64_t lda = fields(a)[kLd], ldb = fields(b)[kLd], ldd = fields(dl)[kLd];
  const Operand Ao{A, cudaDataType(fields(a)[kType])}, Bo{B, cudaDataType(fields(b)[kType])};
  if (Ao.type != Bo.type || fields(c)[kType] != CUDA_R_32F || fields(dl)[kType] != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  auto* Df = static_cast<float*>(D);
  bool tf32 = fields(d)[kCompute] == CUBLAS_COMPUTE_32F_FAST_TF32;
  sy_emu::enqueue([=] { matmul(ta, tb, m, n, k, al, Ao, lda, Bo, ldb, Df, ldd, bias, relu, tf32); },
                  sy_emu::kKernelNode);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t create(cublasHandle_t* h) {
  static char tag;
  *h = reinterpret_cast<cublasHandle_t>(&tag);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t destroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t set_stream(cublasHandle_t, cudaStream_t s) {
  blas_stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t set_workspace(cublasHandle_t, void*, size_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t set_math_mode(cublasHandle_t, cublasMath_t mode) {
  math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t version(cublasHandle_t, int* v) {
  *v = 130100;
  return CUBLAS_STATUS_SUCCESS;
}
const char* status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_(emulated)";
  }
}
// cublasGemmEx's checks: the stream, the dimensions, the supported type
// rows. Returns the TF32 rounding to apply through `tf32`.
cublasStatus_t check_ex(bool ta, bool tb, int m, int n, int k, cudaDataType at, int lda,
                        cudaDataType bt, int ldb, const void* beta, cudaDataType ct, int ldc,
                        cublasComputeType_t compute, bool& tf32) {
  if (blas_stream != sy_emu::device_stream)
    return CUBLAS_STATUS_INVALID_VALUE;  // cublasSetStream forgotten
  if (m < 0 || n < 0 || k < 0 || lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m ||
      *static_cast<const float*>(beta) != 0.f)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!operand_type(at) || at != bt || ct != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (compute == CUBLAS_COMPUTE_32F_FAST_TF32) {
    if (at != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    tf32 = true;
  } else if (compute == CUBLAS_COMPUTE_32F) {
    tf32 = at == CUDA_R_32F && math_mode == CUBLAS_TF32_TENSOR_OP_MATH;
  } else {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t gemm_strided_batched_ex(cublasHandle_t, cublasOperation_t transa,
                                       cublasOperation_t transb, int m, int n, int k,
                                       const void* alpha, const void* A, cudaDataType at, int lda,
                                       long long stride_a, const void* B, cudaDataType bt, int ldb,
                                       long long stride_b, const void* beta, void* C,
                                       cudaDataType ct, int ldc, long long stride_c, int batch,
                                       cublasComputeType_t compute, cublasGemmAlgo_t) {
  bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T, tf32 = false;
  if (cublasStatus_t st = check_ex(ta, tb, m, n, k, at, lda, bt, ldb, beta, ct, ldc, compute, tf32);
      st != CUBLAS_STATUS_SUCCESS)
    return st;
  if (batch < 0 || stride_a < 0 || stride_b < 0 || stride_c < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *static_cast<const float*>(alpha);
  const size_t eb = type_bytes(at);
  sy_emu::enqueue(
      [=] {
        for (int b = 0; b < batch; ++b)
          matmul(ta, tb, uint64_t(m), uint64_t(n), uint64_t(k), al,
                 {static_cast<const char*>(A) + b * stride_a * eb, at}, uint64_t(lda),
                 {static_cast<const char*>(B) + b * stride_b * eb, bt}, uint64_t(ldb),
                 static_cast<float*>(C) + b * stride_c, uint64_t(ldc), nullptr, false, tf32);
      },
      sy_emu::kKernelNode);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t gemm_ex(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int m,
                       int n, int k, const void* alpha, const void* A, cudaDataType at, int lda,
                       const void* B, cudaDataType bt, int ldb, const void* beta, void* C,
                       cudaDataType ct, int ldc, cublasComputeType_t compute,
                       cublasGemmAlgo_t algo) {
  return gemm_strided_batched_ex(h, transa, transb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0,
                                 beta, C, ct, ldc, 0, 1, compute, algo);
}

}  // namespace

const BlasApi& sy_emu_blas_api() {
  static const BlasApi api = [] {
    BlasApi a;
    a.cublas_path = a.lt_path = "(emulated)";
    a.cublasCreate_v2 = create;
    a.cublasDestroy_v2 = destroy;
    a.cublasSetStream_v2 = set_stream;
    a.cublasSetWorkspace_v2 = set_workspace;
    a.cublasSetMathMode = set_math_mode;
    a.cublasGemmEx = gemm_ex;
    a.cublasGemmStridedBatchedEx = gemm_strided_batched_ex;
    a.cublasGetStatusName = status_name;
    a.cublasGetVersion_v2 = version;
    a.cublasLtCreate = lt_create;
    a.cublasLtDestroy = lt_destroy;
    a.cublasLtGetVersion = lt_version;
    a.cublasLtMatmul = lt_matmul;
    a.cublasLtMatmulDescCreate = desc_create;
    a.cublasLtMatmulDescDestroy = desc_destroy;
    a.cublasLtMatmulDescSetAttribute = desc_set;
    a.cublasLtMatrixLayoutCreate = layout_create;
    a.cublasLtMatrixLayoutDestroy = layout_destroy;
    a.cublasLtMatmulPreferenceCreate = pref_create;
    a.cublasLtMatmulPreferenceDestroy = pref_destroy;
    a.cublasLtMatmulPreferenceSetAttribute = pref_set;
    a.cublasLtMatmulAlgoGetHeuristic = heuristic;
    return a;
  }();
  return api;
}

}  // namespace switchyard::cuda_impl
