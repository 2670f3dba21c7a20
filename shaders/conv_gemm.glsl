// SPDX-License-Identifier: MIT
// The convolutions as implicit GEMMs (conv2d.comp, conv2d_backward_input.comp,
// conv2d_backward_weight.comp set CONV_MODE and include this). Per group g
// (and per split of the weight gradient), C (M x N) = A (M x K) B (K x N),
// where A and B are read in place from the kernel's arguments, never
// expanded in memory (shapes in backend/kernels.h; P = OH*OW, KK = kh*kw):
//   0 forward:  C[oc, (n, oh, ow)] = sum over k = (c, kh, kw) of
//               w[oc, k] * x[n, c, oh*s - p + kh*d, ow*s - p + kw*d]
//   1 input:    C[c, (n, h, w)] = sum over k = (oc, kh, kw) of
//               w[oc, c, kh, kw] * dy[n, oc, (h + p - kh*d)/s, (w + p - kw*d)/s]
//               (the taps whose division is exact and inside the output)
//   2 weight:   C[oc, (c, kh, kw)] = sum over k = (n, oh, ow) in the split of
//               dy[n, oc, oh, ow] * x[n, c, oh*s - p + kh*d, ow*s - p + kw*d]
// Tiling as gemm.comp: a workgroup computes a BM x BN tile with (BM/TM) x
// (BN/TN) invocations of TM x TN accumulators, K in steps of BK through
// shared memory (As k-major vec4s of 4 rows, Bs of 4 columns). Each
// invocation loads the same 4 rows of A and 4 columns of B at every step,
// so their decoding (sample, pixel, channel offsets) is done once, before
// the K loop; only the BK/(WG*4/BM) k indices of a step are decoded per step.
// Dispatch: (ceil(N/BN), ceil(M/BM), groups; times splits for the weight).
// The subgroup build shares A's loads across a subgroup as gemm_sg does.
#include "common.glsl"
#ifdef SY_SUBGROUP
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
shared vec4 As[BK * BM / 4];
shared vec4 Bs[BK * BN / 4];

#if CONV_MODE == 0
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3)
#define PARAMS Conv2dParams
#define LOAD_PARAMS load_Conv2dParams
#define XF F(1)
#define XO O(1)
#define WF F(2)
#define WO O(2)
#elif CONV_MODE == 1
ARG_RW(0) ARG_RO(1) ARG_RO(2)
#define PARAMS Conv2dBackwardInputParams
#define LOAD_PARAMS load_Conv2dBackwardInputParams
#define DYF F(1)
#define DYO O(1)
#define WF F(2)
#define WO O(2)
#else
ARG_RW(0) ARG_RO(1) ARG_RO(2)
#define PARAMS Conv2dBackwardWeightParams
#define LOAD_PARAMS load_Conv2dBackwardWeightParams
#define DYF F(1)
#define DYO O(1)
#define XF F(2)
#define XO O(2)
#endif

Op p;
uint C, H, W, OC, Cg, OCg, K0, K1, KK, OH, OW, P, HW;
int S0, S1, P0, P1, D0, D1;
uint grp;  // this workgroup's group

// ---- the operands, element by element (0 outside) -------------------------------
// Each loader takes the decoded row or column (fixed for the launch) and k.

#if CONV_MODE == 0
// A = w: row m's base; B = x: column (n, oh, ow) as its plane base and the
// padded top-left of its window.
struct Col { uint base; int h0, w0; bool ok; };
Col col_of(uint n) {  // n < N*P
  Col c;
  uint s = n / P, pix = n - s * P, oh = pix / OW, ow = pix - oh * OW;
  c.base = XO + (s * C + grp * Cg) * HW;
  c.h0 = int(oh) * S0 - P0;
  c.w0 = int(ow) * S1 - P1;
  c.ok = true;
  return c;
}
float a_at(uint row_base, uint k) { return WF[row_base + k]; }
float b_at(Col c, uint k, uint kc, uint kh, uint kw) {
  int ih = c.h0 + int(kh) * D0, iw = c.w0 + int(kw) * D1;
  if (ih < 0 || ih >= int(H) || iw < 0 || iw >= int(W)) return 0.0;
  return XF[c.base + kc * HW + uint(ih) * W + uint(iw)];
}
#elif CONV_MODE == 1
// A = w transposed: row m = input channel c; k = (oc, kh, kw). B = dy:
// column (n, h, w) as its sample's dy base and h + p, w + p.
struct Col { uint base; int h0, w0; bool ok; };
Col col_of(uint n) {
  Col c;
  uint s = n / HW, pix = n - s * HW, h = pix / W, w = pix - h * W;
  c.base = DYO + (s * OC + grp * OCg) * P;
  c.h0 = int(h) + P0;
  c.w0 = int(w) + P1;
  c.ok = true;
  return c;
}
float a_at(uint row_base, uint k, uint koc, uint khw) {
  return WF[row_base + koc * Cg * KK + khw];
}
float b_at(Col c, uint k, uint koc, uint kh, uint kw) {
  int th = c.h0 - int(kh) * D0, tw = c.w0 - int(kw) * D1;
  if (th < 0 || tw < 0) return 0.0;
  uint oh = uint(th), ow = uint(tw);
  if (S0 != 1 || S1 != 1) {
    if (oh % uint(S0) != 0u || ow % uint(S1) != 0u) return 0.0;
    oh /= uint(S0);
    ow /= uint(S1);
  }
  if (oh >= OH || ow >= OW) return 0.0;
  return DYF[c.base + koc * P + oh * OW + ow];
}
#else
// A = dy: row m = output channel; k = (n, pixel). B = x: column (c, kh, kw)
// as its channel's offset and the tap's displacement.
struct Col { uint base; int h0, w0; bool ok; };
Col col_of(uint n) {  // n < Cg*KK
  Col c;
  uint ch = n / KK, t = n - ch * KK, kh = t / K1, kw = t - kh * K1;
  c.base = XO + (grp * Cg + ch) * HW;
  c.h0 = int(kh) * D0 - P0;
  c.w0 = int(kw) * D1 - P1;
  c.ok = true;
  return c;
}
float a_at(uint row_base, uint ks, uint kpix) { return DYF[row_base + ks * OC * P + kpix]; }
float b_at(Col c, uint ks, uint koh, uint kow) {
  int ih = int(koh) * S0 + c.h0, iw = int(kow) * S1 + c.w0;
  if (ih < 0 || ih >= int(H) || iw < 0 || iw >= int(W)) return 0.0;
  return XF[c.base + ks * C * HW + uint(ih) * W + uint(iw)];
}
#endif

void main() {
  p = load_op();
  PARAMS q = LOAD_PARAMS();
  C = uint(q.channels), H = uint(q.height), W = uint(q.width), OC = uint(q.out_channels);
  uint G = uint(q.groups);
  Cg = C / G, OCg = OC / G, K0 = uint(q.kernel[0]), K1 = uint(q.kernel[1]), KK = K0 * K1;
  S0 = q.stride[0], S1 = q.stride[1], P0 = q.padding[0], P1 = q.padding[1];
  D0 = q.dilation[0], D1 = q.dilation[1];
  OH = uint((q.height + 2 * q.padding[0] - q.dilation[0] * (q.kernel[0] - 1) - 1) / q.stride[0] + 1);
  OW = uint((q.width + 2 * q.padding[1] - q.dilation[1] * (q.kernel[1] - 1) - 1) / q.stride[1] + 1);
  P = OH * OW, HW = H * W;
  uint NB = uint(q.batch);
  grp = gl_WorkGroupID.z % G;
#if CONV_MODE == 0
  uint M = OCg, N = NB * P, K = Cg * KK, kbeg = 0u;
#elif CONV_MODE == 1
  uint M = Cg, N = NB * HW, K = OCg * KK, kbeg = 0u;
#else
  uint split = gl_WorkGroupID.z / G, total = NB * P;
  uint len = (total + uint(q.splits) - 1u) / uint(q.splits);
  uint M = OCg, N = Cg * KK, kbeg = min(total, split * len);
  uint K = min(total, kbeg + len) - kbeg;
#endif
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  uint t = gl_LocalInvocationID.x;
  const uint RX = BN / TN;
  uint tx = t % RX, ty = t / RX;

  // This invocation's 4 rows of A (m4a) and 4 columns of B (n4b) at every
  // step, and the first of its k rows in the tile (kka) with their stride.
  const uint QA = BM / 4u, QB = BN / 4u;
  uint m4a = t % QA, kka = t / QA;
  uint n4b = t % QB, kkb = t / QB;
  const uint KSA = WG / QA, KSB = WG / QB;  // k rows apart between an invocation's loads
  uint rowb[4];
  bool rowok[4];
  for (uint i = 0u; i < 4u; ++i) {
    uint gm = m0 + 4u * m4a + i;
    rowok[i] = gm < M;
#if CONV_MODE == 0
    rowb[i] = WO + (grp * OCg + gm) * K;
#elif CONV_MODE == 1
    rowb[i] = WO + grp * OCg * Cg * KK + gm * KK;
#else
    rowb[i] = DYO + (grp * OCg + gm) * P;
#endif
  }
  Col cols[4];
  for (uint j = 0u; j < 4u; ++j) {
    uint gn = n0 + 4u * n4b + j;
    cols[j] = col_of(min(gn, N - 1u));
    cols[j].ok = gn < N;
  }

  vec4 acc[TM][TN / 4u];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN / 4u; ++j) acc[i][j] = vec4(0.0);

  for (uint k0 = 0u; k0 < K; k0 += BK) {
    // A tile: (kk, m4) entries, this invocation's rows m4a at k rows kka + i*KSA.
    for (uint kk = kka; kk < BK; kk += KSA) {
      uint k = k0 + kk;
      vec4 v = vec4(0.0);
      if (k < K) {
#if CONV_MODE == 0
        for (uint i = 0u; i < 4u; ++i)
          if (rowok[i]) v[i] = a_at(rowb[i], k);
#elif CONV_MODE == 1
        uint koc = k / KK, khw = k - koc * KK;
        for (uint i = 0u; i < 4u; ++i)
          if (rowok[i]) v[i] = a_at(rowb[i], k, koc, khw);
#else
        uint kg = kbeg + k, ks = kg / P, kpix = kg - ks * P;
        for (uint i = 0u; i < 4u; ++i)
          if (rowok[i]) v[i] = a_at(rowb[i], ks, kpix);
#endif
      }
      As[kk * QA + m4a] = v;
    }
    // B tile: (kk, n4) entries, this invocation's columns n4b at k rows kkb + i*KSB.
    for (uint kk = kkb; kk < BK; kk += KSB) {
      uint k = k0 + kk;
      vec4 v = vec4(0.0);
      if (k < K) {
#if CONV_MODE == 0
        uint kc = k / KK, t2 = k - kc * KK, kh = t2 / K1, kw = t2 - kh * K1;
        for (uint j = 0u; j < 4u; ++j)
          if (cols[j].ok) v[j] = b_at(cols[j], k, kc, kh, kw);
#elif CONV_MODE == 1
        uint koc = k / KK, t2 = k - koc * KK, kh = t2 / K1, kw = t2 - kh * K1;
        for (uint j = 0u; j < 4u; ++j)
          if (cols[j].ok) v[j] = b_at(cols[j], k, koc, kh, kw);
#else
        uint kg = kbeg + k, ks = kg / P, kpix = kg - ks * P, koh = kpix / OW, kow = kpix - koh * OW;
        for (uint j = 0u; j < 4u; ++j)
          if (cols[j].ok) v[j] = b_at(cols[j], ks, koh, kow);
#endif
      }
      Bs[kk * QB + n4b] = v;
    }
    barrier();
    for (uint kk = 0u; kk < BK; ++kk) {
      vec4 b[TN / 4u];
      for (uint j = 0u; j < TN / 4u; ++j) b[j] = Bs[kk * QB + tx * (TN / 4u) + j];
#ifdef SY_SUBGROUP
      vec4 mine = As[kk * QA + ty * (TM / 4u) + gl_SubgroupInvocationID % (TM / 4u)];
#endif
      for (uint i4 = 0u; i4 < TM / 4u; ++i4) {
#ifdef SY_SUBGROUP
        vec4 a = subgroupShuffle(mine, i4);
#else
        vec4 a = As[kk * QA + ty * (TM / 4u) + i4];
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
  }

  // The epilogue: C (m, n) to its place in the output.
  uint gn0 = n0 + TN * tx;
  for (uint j = 0u; j < TN; ++j) {
    uint gn = gn0 + j;
    if (gn >= N) continue;
#if CONV_MODE == 0
    uint s = gn / P, pix = gn - s * P;
    uint dst = O(0) + (s * OC + grp * OCg) * P + pix, ld = P;
#elif CONV_MODE == 1
    uint s = gn / HW, pix = gn - s * HW;
    uint dst = O(0) + (s * C + grp * Cg) * HW + pix, ld = HW;
#else
    uint dst = O(0) + (split * OC + grp * OCg) * N + gn, ld = N;
#endif
    for (uint i = 0u; i < TM; ++i) {
      uint gm = m0 + TM * ty + i;
      if (gm >= M) continue;
      float v = acc[i][j / 4u][j % 4u];
#if CONV_MODE == 0
      if ((p.flags & 16u) != 0u) v += F(3)[O(3) + grp * OCg + gm];  // has_bias, specialized
      v = unary_apply(p.op, v);  // p.op = SPEC_OP = act
#endif
      F(0)[dst + gm * ld] = v;
    }
  }
}
