// SPDX-License-Identifier: MIT
// cuBLASLt / cuBLAS GEMM for the kernel table's row-major gemm.
//
// Row-major C (M x N) = op(A) op(B) is, read column-major, C^T (N x M) =
// op(B)^T op(A)^T, so every call passes B first: column-major m = N, n = M,
// k = K, with B's and A's row-major storage read as their transposes. The
// linear layer's bias is a vector over C's columns, which is the row vector of
// C^T that cuBLASLt's BIAS epilogue adds, and ReLU fuses as RELU_BIAS. Other
// activations (GELU included: cuBLASLt does not document which GELU formula it
// uses, and all backends must agree) run as our own pass over C.
//
// A and B may be bf16 or f16 (autocast's GEMMs): cuBLASLt's mixed-precision
// row A/B 16BF or 16F, C/D 32F, CUBLAS_COMPUTE_32F (tensor cores, f32
// accumulation, the bias in f32). f32 operands use CUBLAS_COMPUTE_32F, or
// CUBLAS_COMPUTE_32F_FAST_TF32 when the run allows TF32 (LaunchEnv::tf32).
#include "cuda_blas.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "cuda_check.h"
#include "switchyard/backend/platform.h"

namespace switchyard::cuda_impl {

void* open_toolkit_library(const std::string& soname, std::string& path, std::string& errors) {
  std::vector<std::string> tries = {soname};
  for (const char* env : {"CUDA_PATH", "CUDA_HOME"})
    if (const char* d = std::getenv(env); d && *d)
      tries.push_back(std::string(d) + "/lib64/" + soname);
  tries.push_back("/usr/local/cuda/lib64/" + soname);
#ifdef SWITCHYARD_CUDA_TOOLKIT_LIB
  tries.push_back(std::string(SWITCHYARD_CUDA_TOOLKIT_LIB) + "/" + soname);
#endif
  for (const std::string& t : tries) {
    std::string err;
    if (void* h = platform::open_library(t.c_str(), &err)) {
      path = t;
      return h;
    }
    if (errors.empty()) errors = err;
  }
  return nullptr;
}

namespace {

struct Loaded {
  BlasApi api;
  std::string error;
};

Loaded load() {
  Loaded l;
  const std::string major = std::to_string(CUBLAS_VER_MAJOR);
  std::string err;
  l.api.lt_lib = open_toolkit_library("libcublasLt.so." + major, l.api.lt_path, err);
  if (l.api.lt_lib)
    l.api.cublas_lib = open_toolkit_library("libcublas.so." + major, l.api.cublas_path, err);
  if (!l.api.lt_lib || !l.api.cublas_lib) {
    l.error = detail::cat("cuBLAS ", major, " not found (looked for libcublas.so.", major,
                          " and libcublasLt.so.", major,
                          " on the library path, in $CUDA_PATH/lib64 and "
                          "/usr/local/cuda/lib64): ",
                          err);
    return l;
  }
  std::string missing;
#define SY_RESOLVE(lib, name)                                                                      \
  l.api.name = reinterpret_cast<decltype(l.api.name)>(platform::library_symbol(l.api.lib, #name)); \
  if (!l.api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
#define SY_RESOLVE_CUBLAS(name) SY_RESOLVE(cublas_lib, name)
#define SY_RESOLVE_LT(name) SY_RESOLVE(lt_lib, name)
  SY_CUBLAS_FUNCS(SY_RESOLVE_CUBLAS)
  SY_CUBLAS_EX_FUNCS(SY_RESOLVE_CUBLAS)
  SY_CUBLASLT_FUNCS(SY_RESOLVE_LT)
#undef SY_RESOLVE_LT
#undef SY_RESOLVE_CUBLAS
#undef SY_RESOLVE
  if (!missing.empty())
    l.error = detail::cat("cuBLAS at ", l.api.cublas_path, " lacks entry points: ", missing);
  return l;
}

void check(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const BlasApi& a = blas_api();
  std::string msg = detail::cat("[gemm] ", call, " failed: ", a.cublasGetStatusName(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory(msg);
  throw Error(msg);
}

cudaDataType cuda_type(DType t) {
  switch (t) {
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    case DType::f32:
      return CUDA_R_32F;
    default:
      throw Error(
          detail::cat("[gemm] expected f32, bf16 or f16 operands on CUDA, found ", dtype_name(t)));
  }
}

cublasComputeType_t compute_type(DType ab, bool tf32) {
  return ab == DType::f32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace

int alignment_of(const void* p) {
  int a = 16;
  while (a > 2 && reinterpret_cast<uintptr_t>(p) % uintptr_t(a)) a /= 2;
  return a;
}

bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e && std::string(e) == value;
}

#ifdef SY_CUDA_EMULATION
// tests/cuda_emu: cuBLAS(Lt) emulated on the host (cublas_emu.cpp).
const BlasApi& sy_emu_blas_api();
const BlasApi& blas_api() { return sy_emu_blas_api(); }
#else
const BlasApi& blas_api() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) throw Error(loaded.error);
  return loaded.api;
}
#endif

Blas::~Blas() { release(); }

void Blas::init(cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  const BlasApi& a = blas_api();
  workspace_ = workspace;
  workspace_bytes_ = workspace_bytes;
  // Made into locals and kept only when everything worked: nothing
  // half-made stays behind, and the next GEMM tries again.
  cublasHandle_t h = nullptr;
  cublasLtHandle_t lt = nullptr;
  try {
    check(a.cublasCreate_v2(&h), "cublasCreate");
    check(a.cublasSetStream_v2(h, stream), "cublasSetStream");
    check(a.cublasSetWorkspace_v2(h, workspace, workspace_bytes), "cublasSetWorkspace");
    // TF32 only through the compute type each call passes (as PyTorch
    // since 1.12, off unless set_float32_matmul_precision allows it): the
    // handle's math mode stays the default, which never takes it for
    // CUBLAS_COMPUTE_32F.
    check(a.cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    check(a.cublasLtCreate(&lt), "cublasLtCreate");
  } catch (...) {
    if (h) a.cublasDestroy_v2(h);
    throw;
  }
  handle_ = h;
  lt_ = lt;
}

void Blas::release() {
  // Only while the CUDA runtime is up (the device's shutdown calls this
  // before it goes): statuses are ignored, nothing can be done about them.
  if (!lt_ && !handle_) return;
  const BlasApi& a = blas_api();
  for (auto& [k, p] : plans_) {
    if (p.a) a.cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) a.cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) a.cublasLtMatrixLayoutDestroy(p.c);
    if (p.desc) a.cublasLtMatmulDescDestroy(p.desc);
  }
  plans_.clear();
  if (lt_) a.cublasLtDestroy(lt_);
  if (handle_) a.cublasDestroy_v2(handle_);
  lt_ = nullptr;
  handle_ = nullptr;
}

Blas::Plan& Blas::plan(const Key& k) {
  if (auto it = plans_.find(k); it != plans_.end()) return it->second;
  const BlasApi& a = blas_api();
  auto [M, N, K, ta, tb, has_bias, act, align_a, align_b, align_c, ab, tf32] = k;
  const cudaDataType ab_type = cuda_type(ab);
  Plan pl;
  cublasLtMatmulPreference_t pref = nullptr;
  auto destroy = [&] {  // on failure: nothing leaks, the exception tells why
    if (pref) a.cublasLtMatmulPreferenceDestroy(pref);
    if (pl.a) a.cublasLtMatrixLayoutDestroy(pl.a);
    if (pl.b) a.cublasLtMatrixLayoutDestroy(pl.b);
    if (pl.c) a.cublasLtMatrixLayoutDestroy(pl.c);
    if (pl.desc) a.cublasLtMatmulDescDestroy(pl.desc);
  };
  try {
    if (!env_is("SWITCHYARD_CUDA_GEMM", "cublas")) {
      Unary u = Unary(act);
      pl.fused_act = u == Unary::relu;
      pl.epilogue = has_bias ? (pl.fused_act ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                             : (pl.fused_act ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
      cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N;   // B
      cublasOperation_t op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;  // A
      check(a.cublasLtMatmulDescCreate(&pl.desc, compute_type(ab, tf32), CUDA_R_32F),
            "cublasLtMatmulDescCreate");
      check(a.cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                             sizeof(op_first)),
            "cublasLtMatmulDescSetAttribute(TRANSA)");
      check(a.cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                             sizeof(op_second)),
            "cublasLtMatmulDescSetAttribute(TRANSB)");
      check(a.cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &pl.epilogue,
                                             sizeof(pl.epilogue)),
            "cublasLtMatmulDescSetAttribute(EPILOGUE)");
      // Stored (column-major) shapes: B^T is N x K (ld N), or K x N (ld K) when
      // transposed; A^T is K x M (ld K), or M x K (ld M); C^T is N x M (ld N).
      check(tb ? a.cublasLtMatrixLayoutCreate(&pl.a, ab_type, K, N, K)
               : a.cublasLtMatrixLayoutCreate(&pl.a, ab_type, N, K, N),
            "cublasLtMatrixLayoutCreate(B)");
      check(ta ? a.cublasLtMatrixLayoutCreate(&pl.b, ab_type, M, K, M)
               : a.cublasLtMatrixLayoutCreate(&pl.b, ab_type, K, M, K),
            "cublasLtMatrixLayoutCreate(A)");
      check(a.cublasLtMatrixLayoutCreate(&pl.c, CUDA_R_32F, N, M, N),
            "cublasLtMatrixLayoutCreate(C)");
      check(a.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
      uint64_t ws = workspace_bytes_;
      // cuBLASLt's A is our B, its B our A; C and D are our C.
      uint32_t al[4] = {uint32_t(align_b), uint32_t(align_a), uint32_t(align_c), uint32_t(align_c)};
      check(a.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &ws, sizeof(ws)),
            "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
      const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
      for (int j = 0; j < 4; ++j)
        check(a.cublasLtMatmulPreferenceSetAttribute(pref, attrs[j], &al[j], sizeof(al[j])),
              "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
      cublasLtMatmulHeuristicResult_t res{};
      int found = 0;
      cublasStatus_t s = a.cublasLtMatmulAlgoGetHeuristic(lt_, pl.desc, pl.a, pl.b, pl.c, pl.c,
                                                          pref, 1, &res, &found);
      a.cublasLtMatmulPreferenceDestroy(pref);
      pref = nullptr;
      if (s == CUBLAS_STATUS_SUCCESS && found > 0 && res.workspaceSize <= workspace_bytes_) {
        pl.algo = res.algo;
        pl.use_lt = true;
      }
    }
  } catch (...) {
    destroy();
    throw;
  }
  if (!pl.use_lt) pl.fused_act = false;  // cublasGemmEx, then our bias/activation pass
  return plans_.emplace(k, pl).first->second;
}

void Blas::gemm(const GemmParams& p, float* C, const void* A, const void* B, const float* bias,
                const LaunchEnv& env) {
  const BlasApi& a = blas_api();
  const int64_t M = p.m, N = p.n, K = p.k;
  const bool ta = p.trans_a, tb = p.trans_b;
  const Unary act = p.act;
  if (!p.has_bias) bias = nullptr;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // empty products: zeros, then the bias and activation
    for (int64_t b = 0; b < std::max<int64_t>(p.batch, 1); ++b) {
      FillParams z;
      z.n = M * N;
      z.dtype = DType::f32;
      void* fill_args[1] = {C + b * p.stride_c};
      launch(z, fill_args, env);
    }
    launch_bias_act_batched(std::max<int64_t>(p.batch, 1), M, N, p.stride_c, C, bias, p.bias_rows,
                            act, env);
    return;
  }
  SY_CHECK(M < (int64_t(1) << 31) && N < (int64_t(1) << 31) && K < (int64_t(1) << 31) &&
               p.lda < (int64_t(1) << 31) && p.ldb < (int64_t(1) << 31),
           "gemm", "expected dimensions below 2^31 on CUDA, found ", M, "x", N, "x", K);
  const float alpha = p.alpha, beta = 0.f;
  const cudaDataType ab_type = cuda_type(p.ab_dtype);
  const cublasComputeType_t compute = compute_type(p.ab_dtype, env.tf32);
  const int64_t lda = p.lda ? p.lda : (ta ? M : K), ldb = p.ldb ? p.ldb : (tb ? K : N);
  const bool packed = lda == (ta ? M : K) && ldb == (tb ? K : N);
  if (p.batch > 1 || (bias && p.bias_rows) || !packed) {  // strided-batched cuBLAS, our epilogue
    const int64_t batch = std::max<int64_t>(p.batch, 1);
    SY_CHECK(batch < (int64_t(1) << 31), "gemm",
             "expected fewer than 2^31 products on CUDA, found ", batch);
    check(a.cublasGemmStridedBatchedEx(handle_, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       ta ? CUBLAS_OP_T : CUBLAS_OP_N, int(N), int(M), int(K),
                                       &alpha, B, ab_type, int(ldb), p.stride_b, A, ab_type,
                                       int(lda), p.stride_a, &beta, C, CUDA_R_32F, int(N),
                                       p.stride_c, int(batch), compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
    launch_bias_act_batched(batch, M, N, p.stride_c, C, bias, p.bias_rows, act, env);
    return;
  }
  // The alignment preferences cover A, B, C and D but not the epilogue's
  // bias: a bias that is not 16-byte aligned (a view) is added by our pass.
  // (Then the activation cannot be fused either: it comes after the bias.)
  const bool lt_bias = bias && alignment_of(bias) == 16;
  const Unary epilogue_act = bias && !lt_bias ? Unary::none : act;
  Plan& pl = plan(Key{M, N, K, ta, tb, lt_bias, int(epilogue_act), alignment_of(A), alignment_of(B),
                      alignment_of(C), p.ab_dtype, env.tf32});
  if (pl.use_lt) {
    if (lt_bias)
      check(a.cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                             sizeof(bias)),
            "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    check(a.cublasLtMatmul(lt_, pl.desc, &alpha, B, pl.a, A, pl.b, &beta, C, pl.c, C, pl.c,
                           &pl.algo, workspace_, workspace_bytes_, env.stream),
          "cublasLtMatmul");
    // What the epilogue did not do (a no-op when it did everything).
    launch_bias_act(M, N, C, lt_bias ? nullptr : bias, pl.fused_act ? Unary::none : act, env);
    return;
  }
  check(a.cublasGemmEx(handle_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                       int(N), int(M), int(K), &alpha, B, ab_type, int(tb ? K : N), A, ab_type,
                       int(ta ? M : K), &beta, C, CUDA_R_32F, int(N), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  launch_bias_act(M, N, C, bias, act, env);
}

}  // namespace switchyard::cuda_impl
