// gemm: C[M,N] = f[0] * op(A) op(B) (+ bias[N]), then activation i[6].
// args C, A, B[, bias]. i[0]=M i[1]=N i[2]=K i[3]=transA i[4]=transB
// i[5]=has_bias i[6]=Unary code (0 none). A is [M,K] row-major, or [K,M] when
// transposed; B is [K,N], or [N,K] when transposed. This covers the linear
// layer's Y = X W^T + b (tb), dX = dY W and dW = dY^T X (ta).
//
// Tiling: a workgroup computes a BM x BN tile of C, (BM/TM) x (BN/TN)
// invocations each holding TM x TN accumulators in registers (rows ty +
// i*BM/TM, cols tx + j*BN/TN, so neighbouring invocations touch neighbouring
// addresses in shared memory and in C). K advances in steps of BK through
// shared-memory tiles of A and B, loaded as vec4 along whichever dimension is
// contiguous in memory when the backend's flags say it is aligned (bit 2: A,
// bit 3: B). Tile sizes are specialization constants the backend picks from
// the device's limits. Dispatch: (ceil(N/BN), ceil(M/BM), 1).
#version 450
#include "common.glsl"
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
shared float As[BK * BM];  // As[k * BM + m]
shared float Bs[BK * BN];  // Bs[k * BN + n]

void main() {
  Op p = ops[pc.index];
  uint M = uint(p.i[0]), N = uint(p.i[1]), K = uint(p.i[2]);
  bool ta = p.i[3] != 0, tb = p.i[4] != 0;
  bool va = (p.flags & 4u) != 0u, vb = (p.flags & 8u) != 0u;
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  uint t = gl_LocalInvocationID.x;
  const uint RX = BN / TN, RY = BM / TM;
  uint tx = t % RX, ty = t / RX;
  uint ao = O(1), bo = O(2);

  float acc[TM][TN];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0u; k0 < K; k0 += BK) {
    // A tile: element (m, k) is A[m*K + k], or A[k*M + m] when transposed.
    if (!ta) {
      for (uint q = t; q < BM * BK / 4u; q += WG) {
        uint mm = q / (BK / 4u), kk = (q % (BK / 4u)) * 4u;
        uint gm = m0 + mm, gk = k0 + kk;
        vec4 v = vec4(0.0);
        if (gm < M) {
          uint src = ao + gm * K + gk;
          if (va && gk + 4u <= K) v = V(1)[src / 4u];
          else for (uint j = 0u; j < 4u; ++j) if (gk + j < K) v[j] = F(1)[src + j];
        }
        for (uint j = 0u; j < 4u; ++j) As[(kk + j) * BM + mm] = v[j];
      }
    } else {
      for (uint q = t; q < BM * BK / 4u; q += WG) {
        uint kk = q / (BM / 4u), mm = (q % (BM / 4u)) * 4u;
        uint gm = m0 + mm, gk = k0 + kk;
        vec4 v = vec4(0.0);
        if (gk < K) {
          uint src = ao + gk * M + gm;
          if (va && gm + 4u <= M) v = V(1)[src / 4u];
          else for (uint j = 0u; j < 4u; ++j) if (gm + j < M) v[j] = F(1)[src + j];
        }
        for (uint j = 0u; j < 4u; ++j) As[kk * BM + mm + j] = v[j];
      }
    }
    // B tile: element (k, n) is B[k*N + n], or B[n*K + k] when transposed.
    if (!tb) {
      for (uint q = t; q < BN * BK / 4u; q += WG) {
        uint kk = q / (BN / 4u), nn = (q % (BN / 4u)) * 4u;
        uint gk = k0 + kk, gn = n0 + nn;
        vec4 v = vec4(0.0);
        if (gk < K) {
          uint src = bo + gk * N + gn;
          if (vb && gn + 4u <= N) v = V(2)[src / 4u];
          else for (uint j = 0u; j < 4u; ++j) if (gn + j < N) v[j] = F(2)[src + j];
        }
        for (uint j = 0u; j < 4u; ++j) Bs[kk * BN + nn + j] = v[j];
      }
    } else {
      for (uint q = t; q < BN * BK / 4u; q += WG) {
        uint nn = q / (BK / 4u), kk = (q % (BK / 4u)) * 4u;
        uint gk = k0 + kk, gn = n0 + nn;
        vec4 v = vec4(0.0);
        if (gn < N) {
          uint src = bo + gn * K + gk;
          if (vb && gk + 4u <= K) v = V(2)[src / 4u];
          else for (uint j = 0u; j < 4u; ++j) if (gk + j < K) v[j] = F(2)[src + j];
        }
        for (uint j = 0u; j < 4u; ++j) Bs[(kk + j) * BN + nn] = v[j];
      }
    }
    barrier();
    for (uint kk = 0u; kk < BK; ++kk) {
      float a[TM], b[TN];
      for (uint i = 0u; i < TM; ++i) a[i] = As[kk * BM + ty + i * RY];
      for (uint j = 0u; j < TN; ++j) b[j] = Bs[kk * BN + tx + j * RX];
      for (uint i = 0u; i < TM; ++i)
        for (uint j = 0u; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier();
  }

  float alpha = p.f[0];
  bool bias = p.i[5] != 0;
  for (uint i = 0u; i < TM; ++i) {
    uint gm = m0 + ty + i * RY;
    if (gm >= M) continue;
    for (uint j = 0u; j < TN; ++j) {
      uint gn = n0 + tx + j * RX;
      if (gn >= N) continue;
      float v = alpha * acc[i][j];
      if (bias) v += F(3)[O(3) + gn];
      F(0)[O(0) + gm * N + gn] = unary_apply(p.i[6], v);
    }
  }
}
