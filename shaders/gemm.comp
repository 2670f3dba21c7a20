// SPDX-License-Identifier: MIT
// gemm: C[M,N] = alpha * op(A) op(B) (+ bias[N]), then activation `act`
// (SPEC_OP). args C, A, B[, bias]; GemmParams. A is [M,K] row-major, or [K,M] when
// transposed; B is [K,N], or [N,K] when transposed. This covers the linear
// layer's Y = X W^T + b (tb), dX = dY W and dW = dY^T X (ta). Batched: product
// z = gl_WorkGroupID.z reads A + z*stride_a, B + z*stride_b and writes
// C + z*stride_c; bias_rows adds bias[z*M + m] per row instead of bias[n].
//
// Tiling: a workgroup computes a BM x BN tile of C with (BM/TM) x (BN/TN)
// invocations, each holding a TM x TN block of accumulators in registers
// (TM rows of TN/4 vec4s). K advances in steps of BK through shared-memory
// tiles of A and B stored k-major as vec4, so the inner loop is TM/4 + TN/4
// vec4 loads from shared memory and TM*TN/4 vec4 FMAs. Global loads are vec4
// along whichever dimension is contiguous when the backend's flags say it is
// aligned (bit 2: A, bit 3: B). BM, BN, BK, TM and TN (TM, TN multiples of 4)
// are specialization constants the backend picks from the device.
// Dispatch: (ceil(N/BN), ceil(M/BM), batch). Flag bit 5 (kGemmAccumulate) adds
// the product to C's values: the later parts of a GEMM the backend splits
// along K for a driver that bounds a shader's loop iterations (llvmpipe).
// The table's aux, when not 0, is C's row stride: a block of columns of a C
// too large for one binding (the backend's split by maxStorageBufferRange).
//
// Split-K (vk_gemm.cpp chooses it for a product whose tiles cannot fill
// the device): the first pass (SY_PARTIALS) runs aux parts of K, each
// ceil(ceil(K/aux)/BK)*BK deep, as z = part * batch + product, and writes
// each part's raw sums to the scratch (binding 4, part-major, M x N per
// product); the second (SY_FINISH, a grid-stride loop over the outputs)
// adds the parts in order, then scales, adds the bias and C (accumulate)
// and applies the activation: the same result every run.
//
// The GPU loop (flag kGemmPrefetch): each invocation loads its share of the
// next BK slice of A and B into registers before multiplying the current
// one from shared memory, and stores them after the barrier, so global
// memory latency overlaps the multiply-adds. Every invocation loads whole
// vec4s along the contiguous dimension (NA and NB of them a step); rows of
// a k-contiguous operand are scattered into the k-major tile as scalars.
#version 450
#include "common.glsl"
#ifdef SY_SUBGROUP
// The build for CPU drivers (chosen by the backend only where a subgroup is
// a run of consecutive invocations within one row of the workgroup, so its
// lanes share ty): each lane loads one of the TM/4 vec4s of A the row
// needs, and the lanes swap them with subgroupShuffle instead of every lane
// loading all of them (such drivers load memory one lane at a time).
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3) ARG_RW(4)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
shared vec4 As[BK * BM / 4];  // As[k * BM/4 + m/4] holds rows m..m+3 of column k
shared vec4 Bs[BK * BN / 4];  // Bs[k * BN/4 + n/4] holds columns n..n+3 of row k
#define PREFETCH ((SPEC_FLAGS & 131072u) != 0u)  // vk_launch.h's kGemmPrefetch
// The GPU loop's vec4 loads per invocation and step, of A's and B's tiles.
const uint NA = (BM * BK / 4u + WG - 1u) / WG;
const uint NB = (BN * BK / 4u + WG - 1u) / WG;

// 16-bit A and B (flag kGemmHalf; f16 with kGemmF16, else bf16): elements
// are halves of 32-bit words, widened as they are loaded (exact); the sums
// stay f32. Element indices then count halves from the binding's start.
#define HALF_AB ((SPEC_FLAGS & 262144u) != 0u)
#define HALF_DT ((SPEC_FLAGS & 524288u) != 0u ? DT_F16 : DT_BF16)
// A 16-bit C (flag kGemmHalfC; f16 with kGemmF16C, else bf16): the f32
// result (bias, accumulation and activation included) rounded once, stored
// a word at a time; a word shared with another invocation's elements (or
// another tensor's) is updated atomically, half by half. C's element indices
// then count halves. (A later part of a serial K split would add to the
// rounded value of the earlier ones: the device's gemm_writes refuses
// 16-bit C for such products, so the ops ask for f32 and a cast.)
#define HALF_C ((SPEC_FLAGS & 1048576u) != 0u)
#define HALF_CDT ((SPEC_FLAGS & 2097152u) != 0u ? DT_F16 : DT_BF16)
#define C_BASE (HALF_C ? p.off[0] >> 1 : O(0))
float load_c(uint i) { return HALF_C ? half_to_f32(HALF_CDT, LOAD_U16(0, i)) : F(0)[i]; }

// Four consecutive values of a matrix row starting at `src` (elements),
// zero past `limit` values left in the row; vec4 when aligned.
vec4 load4_a(uint src, uint left, bool vec) {
  vec4 v = vec4(0.0);
  if (HALF_AB) {
    if (left >= 4u && (src & 1u) == 0u) {  // two whole words
      uvec2 w = uvec2(U(1)[src >> 1], U(1)[(src >> 1) + 1u]);
      return vec4(half_to_f32(HALF_DT, w.x & 0xffffu), half_to_f32(HALF_DT, w.x >> 16),
                  half_to_f32(HALF_DT, w.y & 0xffffu), half_to_f32(HALF_DT, w.y >> 16));
    }
    for (uint j = 0u; j < min(left, 4u); ++j) v[j] = half_to_f32(HALF_DT, LOAD_U16(1, src + j));
    return v;
  }
  if (vec && left >= 4u) return V(1)[src / 4u];
  for (uint j = 0u; j < min(left, 4u); ++j) v[j] = F(1)[src + j];
  return v;
}
vec4 load4_b(uint src, uint left, bool vec) {
  vec4 v = vec4(0.0);
  if (HALF_AB) {
    if (left >= 4u && (src & 1u) == 0u) {  // two whole words
      uvec2 w = uvec2(U(2)[src >> 1], U(2)[(src >> 1) + 1u]);
      return vec4(half_to_f32(HALF_DT, w.x & 0xffffu), half_to_f32(HALF_DT, w.x >> 16),
                  half_to_f32(HALF_DT, w.y & 0xffffu), half_to_f32(HALF_DT, w.y >> 16));
    }
    for (uint j = 0u; j < min(left, 4u); ++j) v[j] = half_to_f32(HALF_DT, LOAD_U16(2, src + j));
    return v;
  }
  if (vec && left >= 4u) return V(2)[src / 4u];
  for (uint j = 0u; j < min(left, 4u); ++j) v[j] = F(2)[src + j];
  return v;
}

// The second pass of a split: output i of every product, its parts added
// in order.
void finish(Op p, GemmParams prm) {
  uint M = uint(prm.m), N = uint(prm.n), nb = uint(max(prm.batch, 1));
  uint mn = M * N, total = nb * mn, parts = p.aux;
  bool bias = (p.flags & 16u) != 0u, accumulate = (p.flags & 32u) != 0u;
  FOR_ITEMS(i, total) {
    float v = 0.0;
    for (uint s = 0u; s < parts; ++s) v += F(4)[O(4) + s * total + i];
    uint z = i / mn, r = i - z * mn, gm = r / N, gn = r - gm * N;
    uint c = C_BASE + z * uint(prm.stride_c) + gm * N + gn;
    v *= prm.alpha;
    if (bias) v += F(3)[O(3) + (prm.bias_rows ? z * M + gm : gn)];
    if (accumulate) v += load_c(c);
    v = unary_apply(p.op, v);
    if (HALF_C) {  // one half a invocation: atomically
      uint h = f32_to_half(HALF_CDT, v);
      STORE_U16_PAIR(0, c >> 1u, h, h, (c & 1u) == 0u, (c & 1u) != 0u)
    } else {
      F(0)[c] = v;
    }
  }
}

void main() {
  Op p = load_op();
  GemmParams prm = load_GemmParams();
  if ((p.flags & SY_FINISH) != 0u) {
    finish(p, prm);
    return;
  }
  uint M = uint(prm.m), N = uint(prm.n), K = uint(prm.k);
  bool ta = prm.trans_a, tb = prm.trans_b;
  // Row strides of A and B as stored (0: packed).
  uint lda = prm.lda != 0 ? uint(prm.lda) : (ta ? M : K);
  uint ldb = prm.ldb != 0 ? uint(prm.ldb) : (tb ? K : N);
  bool va = (p.flags & 4u) != 0u, vb = (p.flags & 8u) != 0u;
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  uint t = gl_LocalInvocationID.x;
  const uint RX = BN / TN;
  uint tx = t % RX, ty = t / RX;  // columns TN*tx.., rows TM*ty..
  uint z = gl_WorkGroupID.z;
  // A split's part: products z = part * batch + product, each part K/aux
  // deep in whole BK steps, its operands' starts moved to its first k.
  bool partial = (p.flags & SY_PARTIALS) != 0u;
  uint part = 0u, nb = uint(max(prm.batch, 1)), kb = 0u;
  if (partial) {
    part = z / nb;
    z -= part * nb;
    uint kp = ((K + p.aux - 1u) / p.aux + BK - 1u) / BK * BK;
    kb = min(K, part * kp);
    K = min(K - kb, kp);
  }
  uint ao = (HALF_AB ? p.off[1] >> 1 : O(1)) + z * uint(prm.stride_a) + (ta ? kb * lda : kb);
  uint bo = (HALF_AB ? p.off[2] >> 1 : O(2)) + z * uint(prm.stride_b) + (tb ? kb : kb * ldb);
  uint co = C_BASE + z * uint(prm.stride_c);

  vec4 acc[TM][TN / 4u];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN / 4u; ++j) acc[i][j] = vec4(0.0);

  // The GPU loop's registers: slot s = t + i * WG of A's tile (BM*BK/4
  // vec4s) and of B's.
  vec4 ra[NA], rb[NB];
  // Loads the slots of the BK slice at k0 into ra and rb.
#define LOAD_SLICE(k0)                                                          \
  for (uint i = 0u; i < NA; ++i) {                                              \
    uint s = t + i * WG, gk, gm;                                                \
    if (!ta) { /* (m, k4): row m's vec4 of k */                                 \
      gm = m0 + s / (BK / 4u), gk = (k0) + 4u * (s % (BK / 4u));                \
      ra[i] = gm < M && s < BM * BK / 4u ? load4_a(ao + gm * lda + gk, gk < K ? K - gk : 0u, va) \
                                         : vec4(0.0);                           \
    } else { /* (k, m4) */                                                      \
      gk = (k0) + s / (BM / 4u), gm = m0 + 4u * (s % (BM / 4u));                \
      ra[i] = gk < K && s < BM * BK / 4u ? load4_a(ao + gk * lda + gm, gm < M ? M - gm : 0u, va) \
                                         : vec4(0.0);                           \
    }                                                                           \
  }                                                                             \
  for (uint i = 0u; i < NB; ++i) {                                              \
    uint s = t + i * WG, gk, gn;                                                \
    if (!tb) { /* (k, n4) */                                                    \
      gk = (k0) + s / (BN / 4u), gn = n0 + 4u * (s % (BN / 4u));                \
      rb[i] = gk < K && s < BN * BK / 4u ? load4_b(bo + gk * ldb + gn, gn < N ? N - gn : 0u, vb) \
                                         : vec4(0.0);                           \
    } else { /* (n, k4): row n's vec4 of k */                                   \
      gn = n0 + s / (BK / 4u), gk = (k0) + 4u * (s % (BK / 4u));                \
      rb[i] = gn < N && s < BN * BK / 4u ? load4_b(bo + gn * ldb + gk, gk < K ? K - gk : 0u, vb) \
                                         : vec4(0.0);                           \
    }                                                                           \
  }
  // Stores ra and rb into the tiles (k-major; a k-contiguous row's vec4
  // as four scalars of four tile rows).
#define STORE_SLICE()                                                           \
  for (uint i = 0u; i < NA; ++i) {                                              \
    uint s = t + i * WG;                                                        \
    if (s >= BM * BK / 4u) break;                                               \
    if (!ta) {                                                                  \
      uint m = s / (BK / 4u), k4 = s % (BK / 4u);                               \
      for (uint c = 0u; c < 4u; ++c) As[(4u * k4 + c) * (BM / 4u) + m / 4u][m % 4u] = ra[i][c]; \
    } else {                                                                    \
      As[s] = ra[i];                                                            \
    }                                                                           \
  }                                                                             \
  for (uint i = 0u; i < NB; ++i) {                                              \
    uint s = t + i * WG;                                                        \
    if (s >= BN * BK / 4u) break;                                               \
    if (!tb) {                                                                  \
      Bs[s] = rb[i];                                                            \
    } else {                                                                    \
      uint n = s / (BK / 4u), k4 = s % (BK / 4u);                               \
      for (uint c = 0u; c < 4u; ++c) Bs[(4u * k4 + c) * (BN / 4u) + n / 4u][n % 4u] = rb[i][c]; \
    }                                                                           \
  }
  if (PREFETCH && K > 0u) {
    LOAD_SLICE(0u)
    STORE_SLICE()
    barrier();
  }
  for (uint k0 = 0u; k0 < K; k0 += BK) {
    bool more = k0 + BK < K;
    if (PREFETCH) {
      if (more) {
        LOAD_SLICE(k0 + BK)  // in flight while the slice at k0 is multiplied
      }
    } else {
      // A tile: element (m, k) is A[m*lda + k], or A[k*lda + m] when transposed.
      // Every invocation writes whole tile entries (4 rows of one k).
      if (!ta) {
        // 4x4 blocks: four rows, four k each, transposed in registers.
        for (uint q = t; q < (BM / 4u) * (BK / 4u); q += WG) {
          uint m4 = q % (BM / 4u), k4 = q / (BM / 4u);
          uint gk = k0 + 4u * k4, left = gk < K ? K - gk : 0u;
          vec4 r[4];
          for (uint i = 0u; i < 4u; ++i) {
            uint gm = m0 + 4u * m4 + i;
            r[i] = gm < M ? load4_a(ao + gm * lda + gk, left, va) : vec4(0.0);
          }
          for (uint c = 0u; c < 4u; ++c)
            As[(4u * k4 + c) * (BM / 4u) + m4] = vec4(r[0][c], r[1][c], r[2][c], r[3][c]);
        }
      } else {
        for (uint q = t; q < BM * BK / 4u; q += WG) {
          uint kk = q / (BM / 4u), m4 = q % (BM / 4u);
          uint gm = m0 + 4u * m4, gk = k0 + kk;
          vec4 v = gk < K ? load4_a(ao + gk * lda + gm, gm < M ? M - gm : 0u, va) : vec4(0.0);
          As[kk * (BM / 4u) + m4] = v;
        }
      }
      // B tile: element (k, n) is B[k*ldb + n], or B[n*ldb + k] when transposed.
      if (!tb) {
        for (uint q = t; q < BN * BK / 4u; q += WG) {
          uint kk = q / (BN / 4u), n4 = q % (BN / 4u);
          uint gk = k0 + kk, gn = n0 + 4u * n4;
          vec4 v = gk < K ? load4_b(bo + gk * ldb + gn, gn < N ? N - gn : 0u, vb) : vec4(0.0);
          Bs[kk * (BN / 4u) + n4] = v;
        }
      } else {
        for (uint q = t; q < (BN / 4u) * (BK / 4u); q += WG) {
          uint n4 = q % (BN / 4u), k4 = q / (BN / 4u);
          uint gk = k0 + 4u * k4, left = gk < K ? K - gk : 0u;
          vec4 r[4];
          for (uint i = 0u; i < 4u; ++i) {
            uint gn = n0 + 4u * n4 + i;
            r[i] = gn < N ? load4_b(bo + gn * ldb + gk, left, vb) : vec4(0.0);
          }
          for (uint c = 0u; c < 4u; ++c)
            Bs[(4u * k4 + c) * (BN / 4u) + n4] = vec4(r[0][c], r[1][c], r[2][c], r[3][c]);
        }
      }
      barrier();
    }
    for (uint kk = 0u; kk < BK; ++kk) {
      vec4 b[TN / 4u];
      for (uint j = 0u; j < TN / 4u; ++j) b[j] = Bs[kk * (BN / 4u) + tx * (TN / 4u) + j];
#ifdef SY_SUBGROUP
      vec4 mine = As[kk * (BM / 4u) + ty * (TM / 4u) + gl_SubgroupInvocationID % (TM / 4u)];
#endif
      for (uint i4 = 0u; i4 < TM / 4u; ++i4) {
#ifdef SY_SUBGROUP
        vec4 a = subgroupShuffle(mine, i4);
#else
        vec4 a = As[kk * (BM / 4u) + ty * (TM / 4u) + i4];
#endif
        for (uint j = 0u; j < TN / 4u; ++j) {
          acc[4u * i4 + 0u][j] = fma(vec4(a.x), b[j], acc[4u * i4 + 0u][j]);
          acc[4u * i4 + 1u][j] = fma(vec4(a.y), b[j], acc[4u * i4 + 1u][j]);
          acc[4u * i4 + 2u][j] = fma(vec4(a.z), b[j], acc[4u * i4 + 2u][j]);
          acc[4u * i4 + 3u][j] = fma(vec4(a.w), b[j], acc[4u * i4 + 3u][j]);
        }
      }
    }
    barrier();
    if (PREFETCH && more) {
      STORE_SLICE()
      barrier();
    }
  }

  uint gn0 = n0 + TN * tx;
  if (partial) {  // the part's raw sums, for the second pass
    uint po = O(4) + (part * nb + z) * M * N;
    for (uint i = 0u; i < TM; ++i) {
      uint gm = m0 + TM * ty + i;
      if (gm >= M) continue;
      for (uint j = 0u; j < TN; ++j)
        if (gn0 + j < N) F(4)[po + gm * N + gn0 + j] = acc[i][j / 4u][j % 4u];
    }
    return;
  }
  float alpha = prm.alpha;
  bool bias = (p.flags & 16u) != 0u;  // = has_bias, specialized
  bool accumulate = (p.flags & 32u) != 0u;
  uint ldc = p.aux != 0u ? p.aux : N;  // a block of a wider C (the backend's split)
  // (Loops over TN, a constant, so that they unroll and acc stays in
  // registers: a run-time bound makes its indices dynamic, and a CPU
  // driver then keeps it in memory, at half the speed.)
  if (!HALF_C) {
    for (uint i = 0u; i < TM; ++i) {
      uint gm = m0 + TM * ty + i;
      if (gm >= M) continue;
      for (uint j = 0u; j < TN; ++j) {
        uint gn = gn0 + j;
        if (gn >= N) continue;
        float v = alpha * acc[i][j / 4u][j % 4u];
        if (bias) v += F(3)[O(3) + (prm.bias_rows ? z * M + gm : gn)];
        if (accumulate) v += F(0)[co + gm * ldc + gn];
        F(0)[co + gm * ldc + gn] = unary_apply(p.op, v);  // p.op = SPEC_OP = act
      }
    }
    return;
  }
  // 16-bit C: this invocation's columns of a row, gn0 .. gn0 + cols - 1,
  // stored word by word.
  uint cols = gn0 < N ? min(TN, N - gn0) : 0u;
  for (uint i = 0u; i < TM; ++i) {
    uint gm = m0 + TM * ty + i;
    if (gm >= M) continue;
    float v[TN];
    for (uint j = 0u; j < TN; ++j) {
      uint gn = gn0 + j;
      v[j] = 0.0;
      if (gn >= N) continue;
      v[j] = alpha * acc[i][j / 4u][j % 4u];
      if (bias) v[j] += F(3)[O(3) + (prm.bias_rows ? z * M + gm : gn)];
      if (accumulate) v[j] += load_c(co + gm * ldc + gn);
      v[j] = unary_apply(p.op, v[j]);
    }
    // Word q of the run holds elements 2q and 2q + 1 when the run starts
    // on a word, else 2q - 1 and 2q (either may be another's: HALF_IN).
    uint h0 = co + gm * ldc + gn0;
    bool odd = (h0 & 1u) != 0u;
    for (uint q = 0u; q <= TN / 2u; ++q) {
      int jl = int(2u * q) - (odd ? 1 : 0);
      bool has_lo = HALF_IN(jl, cols), has_hi = HALF_IN(jl + 1, cols);
      if (!has_lo && !has_hi) continue;
      float vl = odd ? v[max(2u * q, 1u) - 1u] : v[min(2u * q, TN - 1u)];
      float vh = odd ? v[min(2u * q, TN - 1u)] : v[min(2u * q + 1u, TN - 1u)];
      uint lo = has_lo ? f32_to_half(HALF_CDT, vl) : 0u;
      uint hi = has_hi ? f32_to_half(HALF_CDT, vh) : 0u;
      STORE_U16_PAIR(0, (h0 >> 1u) + q, lo, hi, has_lo, has_hi)
    }
  }
}
