// SPDX-License-Identifier: MIT
// GEMM for the CUDA backend through cuBLASLt (cuBLAS as the fallback), both
// opened with dlopen at run time: the binary does not link them, so it starts
// on machines without the CUDA toolkit.
#pragma once
#include <cublasLt.h>
#include <cublas_api.h>

#include <map>
#include <string>
#include <tuple>

#include "cuda_kernels.h"

namespace switchyard::cuda_impl {

// The entry points used, resolved once per process.
struct BlasApi {
  void* cublas_lib = nullptr;
  void* lt_lib = nullptr;
  std::string cublas_path, lt_path;
// clang-format off
#define SY_CUBLAS_FUNCS(X)                                                              \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetWorkspace_v2) \
  X(cublasGetStatusName) X(cublasGetVersion_v2) X(cublasSetMathMode)
// Overloaded in C++ (a wrapper takes the old cudaDataType compute type), so
// declared with their C signatures.
#define SY_CUBLAS_EX_FUNCS(X) X(cublasGemmEx) X(cublasGemmStridedBatchedEx)
#define SY_CUBLASLT_FUNCS(X)                                                            \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtMatmul)           \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                         \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                  \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic)
#define SY_DECLARE_FN(name) decltype(&::name) name = nullptr;
  SY_CUBLAS_FUNCS(SY_DECLARE_FN)
  SY_CUBLASLT_FUNCS(SY_DECLARE_FN)
#undef SY_DECLARE_FN
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                 const void*, const void*, cudaDataType, int, const void*,
                                 cudaDataType, int, const void*, void*, cudaDataType, int,
                                 cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*cublasGemmStridedBatchedEx)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
      cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};
// clang-format on

// Opens a library of the CUDA toolkit by soname: from the library path,
// then $CUDA_PATH/lib64, $CUDA_HOME/lib64, /usr/local/cuda/lib64 and the
// build's toolkit. Null when none opens; `path` is the one that did, and
// `errors` the first failure's text.
void* open_toolkit_library(const std::string& soname, std::string& path, std::string& errors);

// The largest power of two up to 16 dividing the address (at least 2; f32:
// at least 4): the alignment a library's plan for an operand is made for.
int alignment_of(const void* p);
// Whether environment variable `name` is set to exactly `value`.
bool env_is(const char* name, const char* value);

// Opens libcublasLt and libcublas (the soname of the toolkit built against,
// then $CUDA_PATH/lib64, /usr/local/cuda/lib64 and the build's toolkit) and
// resolves every entry point. Throws Error saying what is missing.
const BlasApi& blas_api();

// One device's handles, workspace and GEMM plans. Not thread-safe (the
// device's lock covers it).
class Blas {
 public:
  Blas() = default;
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // Creates the handles and binds them to `stream`; `workspace` (of
  // `workspace_bytes`) serves every call, so nothing allocates during a
  // CUDA graph capture.
  void init(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  bool ready() const { return lt_ != nullptr; }
  // C = alpha * op(A) op(B) (+ bias) then act, all row-major (the kernel
  // table's gemm). A and B are p.ab_dtype (f32, bf16 or f16), C and the
  // bias f32; products accumulate in f32, f32 operands as TF32 where
  // env.tf32. Plans are made on first use of a shape; later calls make no
  // host allocation and no device allocation.
  void gemm(const GemmParams& p, float* C, const void* A, const void* B, const float* bias,
            const LaunchEnv& env);
  void release();

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    bool use_lt = false;  // false: cublasGemmEx plus our epilogue kernel
    bool fused_act = false;
  };
  // (M, N, K, transA, transB, bias in the epilogue, activation, alignment
  // of A, B and C in bytes, A's and B's dtype, TF32)
  using Key =
      std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, int, int, int, int, DType, bool>;
  Plan& plan(const Key& k);

  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
};

}  // namespace switchyard::cuda_impl
