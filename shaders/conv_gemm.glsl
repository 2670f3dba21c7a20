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
// the K loop; only the k index of each of its tile rows is decoded per step.
// Dispatch: (ceil(N/BN), ceil(M/BM), groups; times splits for the weight),
// or (ceil(M/BN), ceil(N/BM), ...) on the tall tiles.
// Flags: bit 2 integer division (SY_EXACT_DIV), bit 4 has_bias (forward),
// bit 5 unit strides (input gradient), bit 7 the small tile set, bit 12
// the narrow one, bit 11 the tall tile set, transposed: pixels as
// the tile's rows, channels as its columns (a product of 32 or 64 channels
// fills it where square tiles would be mostly padding).
// The k and pixel decoding divides by reciprocals (common.glsl qdiv; flag
// bit 2 where dividends reach 2^22): 10-18% faster on lavapipe for the
// CNN's convolutions than integer division.
// The subgroup build shares A's loads across a subgroup as gemm_sg does.
#define SY_QDIV
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
// Flag bit 11: the transposed tiles (the product's rows are the pixels).
#define TALL ((SPEC_FLAGS & 2048u) != 0u)
shared vec4 Bs[BK * BN / 4];

#if CONV_MODE == 0
ARG_RW(0) ARG_RO(1) ARG_RO(2) ARG_RO(3)
#define SRC_A_O O(2)
#define PARAMS Conv2dParams
#define LOAD_PARAMS load_Conv2dParams
#define XF F(1)
#define XO O(1)
#define WF F(2)
#define WO O(2)
#elif CONV_MODE == 1
ARG_RW(0) ARG_RO(1) ARG_RO(2)
#define SRC_A_O O(2)
#define UNIT_STRIDE ((SPEC_FLAGS & 32u) != 0u)
#define PARAMS Conv2dBackwardInputParams
#define LOAD_PARAMS load_Conv2dBackwardInputParams
#define DYF F(1)
#define DYO O(1)
#define WF F(2)
#define WO O(2)
#else
ARG_RW(0) ARG_RO(1) ARG_RO(2)
#define SRC_A_O O(1)
#define PARAMS Conv2dBackwardWeightParams
#define LOAD_PARAMS load_Conv2dBackwardWeightParams
#define DYF F(1)
#define DYO O(1)
#define XF F(2)
#define XO O(2)
#endif

Op p;
uint C, H, W, OC, Cg, OCg, K0, K1, KK, OH, OW, P, HW;
float invKK, invK1, invOW, invP, invHW;
int S0, S1, P0, P1, D0, D1;
uint grp;  // this workgroup's group

// ---- the operands, four at a time (0 outside) -----------------------------------
// An invocation loads 4 rows of A and 4 columns of B at every step: their
// decoding (Rows, Cols: bases and window corners) is done once, as vectors,
// and each step decodes only its k. Loads are unconditional, from a clamped
// index (the argument's first element when outside), and the result is
// selected: no branches around loads and no arrays indexed in loops, which
// CPU drivers run lane by lane.
struct Cols { uvec4 base; ivec4 h0, w0; bvec4 ok; };

vec4 load4(uvec4 idx, bvec4 ok, uint safe) {
  idx = mix(uvec4(safe), idx, ok);
#if CONV_MODE == 0 || CONV_MODE == 2
#define SRC_B XF
#else
#define SRC_B DYF
#endif
  return mix(vec4(0.0), vec4(SRC_B[idx.x], SRC_B[idx.y], SRC_B[idx.z], SRC_B[idx.w]), ok);
}
vec4 load4_a(uvec4 idx, bvec4 ok, uint safe) {
  idx = mix(uvec4(safe), idx, ok);
#if CONV_MODE == 2
#define SRC_A DYF
#else
#define SRC_A WF
#endif
  return mix(vec4(0.0), vec4(SRC_A[idx.x], SRC_A[idx.y], SRC_A[idx.z], SRC_A[idx.w]), ok);
}
bvec4 inside(ivec4 ih, ivec4 iw, int h, int w) {
  return bvec4(uvec4(greaterThanEqual(ih, ivec4(0))) & uvec4(lessThan(ih, ivec4(h))) &
               uvec4(greaterThanEqual(iw, ivec4(0))) & uvec4(lessThan(iw, ivec4(w))));
}
bvec4 and4(bvec4 a, bvec4 b) { return bvec4(uvec4(a) & uvec4(b)); }

#if CONV_MODE == 0
// B = x: column n = (sample, oh, ow) as its sample's plane base (group's
// first channel) and the padded top-left of its window.
void col_of(uint n, out uint base, out int h0, out int w0) {
  uint s = n / P, pix = n - s * P, oh = pix / OW, ow = pix - oh * OW;
  base = XO + (s * C + grp * Cg) * HW;
  h0 = int(oh) * S0 - P0;
  w0 = int(ow) * S1 - P1;
}
// k = (c, kh, kw)
vec4 b_at(Cols c, uint kc, uint kh, uint kw) {
  ivec4 ih = c.h0 + int(kh) * D0, iw = c.w0 + int(kw) * D1;
  bvec4 ok = and4(c.ok, inside(ih, iw, int(H), int(W)));
  return load4(c.base + kc * HW + uvec4(ih) * W + uvec4(iw), ok, XO);
}
#elif CONV_MODE == 1
// B = dy: column n = (sample, h, w) as its sample's dy base (group's first
// output channel) and h + p, w + p.
void col_of(uint n, out uint base, out int h0, out int w0) {
  uint s = n / HW, pix = n - s * HW, h = pix / W, w = pix - h * W;
  base = DYO + (s * OC + grp * OCg) * P;
  h0 = int(h) + P0;
  w0 = int(w) + P1;
}
// k = (oc, kh, kw): dy[oc, (h + p - kh*d)/s, (w + p - kw*d)/s] where exact.
vec4 b_at(Cols c, uint koc, uint kh, uint kw) {
  ivec4 th = c.h0 - int(kh) * D0, tw = c.w0 - int(kw) * D1;
  bvec4 ok = and4(c.ok, bvec4(uvec4(greaterThanEqual(th, ivec4(0))) &
                              uvec4(greaterThanEqual(tw, ivec4(0)))));
  if (!UNIT_STRIDE) {  // specialized: flag bit 5 when both strides are 1
    ok = and4(ok, bvec4(uvec4(equal(th % S0, ivec4(0))) & uvec4(equal(tw % S1, ivec4(0)))));
    th /= S0;
    tw /= S1;
  }
  ok = and4(ok, inside(th, tw, int(OH), int(OW)));
  return load4(c.base + koc * P + uvec4(th) * OW + uvec4(tw), ok, DYO);
}
#else
// B = x: column n = (c, kh, kw) as its channel's plane offset and the tap's
// displacement.
void col_of(uint n, out uint base, out int h0, out int w0) {  // n < Cg*KK
  uint ch = n / KK, t = n - ch * KK, kh = t / K1, kw = t - kh * K1;
  base = XO + (grp * Cg + ch) * HW;
  h0 = int(kh) * D0 - P0;
  w0 = int(kw) * D1 - P1;
}
// k = (sample, oh, ow)
vec4 b_at(Cols c, uint ks, uint koh, uint kow) {
  ivec4 ih = c.h0 + int(koh) * S0, iw = c.w0 + int(kow) * S1;
  bvec4 ok = and4(c.ok, inside(ih, iw, int(H), int(W)));
  return load4(c.base + ks * C * HW + uvec4(ih) * W + uvec4(iw), ok, XO);
}
#endif

// The 4 channels' values at k (A of the product), and the 4 pixels' (B).
vec4 load_channels(uvec4 rowb, bvec4 rowok, uint k, uint K, uint kbeg) {
  bvec4 ok = and4(rowok, bvec4(k < K));
#if CONV_MODE == 0
  uvec4 idx = rowb + k;
#elif CONV_MODE == 1
  uint koc = qdiv(k, KK, invKK);
  uvec4 idx = rowb + koc * Cg * KK + (k - koc * KK);
#else
  uint kg = kbeg + k, ks = qdiv(kg, P, invP);
  uvec4 idx = rowb + ks * OC * P + (kg - ks * P);
#endif
  return load4_a(idx, ok, SRC_A_O);
}
vec4 load_pixels(Cols c, uint k, uint K, uint kbeg) {
  c.ok = and4(c.ok, bvec4(k < K));
  k = min(k, K - 1u);
#if CONV_MODE == 0 || CONV_MODE == 1
  uint kc = qdiv(k, KK, invKK), t2 = k - kc * KK, kh = qdiv(t2, K1, invK1);
  return b_at(c, kc, kh, t2 - kh * K1);
#else
  uint kg = kbeg + k, ks = qdiv(kg, P, invP), kpix = kg - ks * P, koh = qdiv(kpix, OW, invOW);
  return b_at(c, ks, koh, kpix - koh * OW);
#endif
}

// Where pixel (or tap) n of the output starts; channel c is c * LD past it.
#if CONV_MODE == 0
#define LD P
uint pixel_base(uint n) {
  uint s = qdiv(n, P, invP);
  return O(0) + (s * OC + grp * OCg) * P + (n - s * P);
}
#elif CONV_MODE == 1
#define LD HW
uint pixel_base(uint n) {
  uint s = qdiv(n, HW, invHW);
  return O(0) + (s * C + grp * Cg) * HW + (n - s * HW);
}
#else
#define LD (Cg * KK)
uint split;
uint pixel_base(uint n) { return O(0) + (split * OC + grp * OCg) * (Cg * KK) + n; }
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
  invKK = 1.0 / float(KK), invK1 = 1.0 / float(K1), invOW = 1.0 / float(OW);
  invP = 1.0 / float(P), invHW = 1.0 / float(HW);
  uint NB = uint(q.batch);
  grp = gl_WorkGroupID.z % G;
#if CONV_MODE == 0
  uint M = OCg, N = NB * P, K = Cg * KK, kbeg = 0u;
#elif CONV_MODE == 1
  uint M = Cg, N = NB * HW, K = OCg * KK, kbeg = 0u;
#else
  split = gl_WorkGroupID.z / G;
  uint total = NB * P;
  uint len = (total + uint(q.splits) - 1u) / uint(q.splits);
  uint M = OCg, N = Cg * KK, kbeg = min(total, split * len);
  uint K = min(total, kbeg + len) - kbeg;
#endif
  // M channels by N pixels (or taps); the tile's rows are the pixels when
  // TALL (the transposed tiles), else the channels.
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  uint t = gl_LocalInvocationID.x;
  const uint RX = BN / TN;
  uint tx = t % RX, ty = t / RX;

  // This invocation's 4 rows (m4a) and 4 columns (n4b) of the tile at every
  // step, and the first of its k rows in the tile (kka, kkb) with their
  // stride: 4 channels and 4 pixels.
  const uint QA = BM / 4u, QB = BN / 4u;
  uint m4a = t % QA, kka = t / QA;
  uint n4b = t % QB, kkb = t / QB;
  const uint KSA = WG / QA, KSB = WG / QB;  // k rows apart between an invocation's loads
  uint ch0 = TALL ? n0 + 4u * n4b : m0 + 4u * m4a, px0 = TALL ? m0 + 4u * m4a : n0 + 4u * n4b;
  uvec4 rowb = uvec4(0u);
  bvec4 rowok = bvec4(false);
  Cols cols;
  for (uint i = 0u; i < 4u; ++i) {  // constant trip count: unrolled
    uint gm = ch0 + i;
    rowok[i] = gm < M;
#if CONV_MODE == 0
    rowb[i] = WO + (grp * OCg + gm) * K;
#elif CONV_MODE == 1
    rowb[i] = WO + grp * OCg * Cg * KK + gm * KK;
#else
    rowb[i] = DYO + (grp * OCg + gm) * P;
#endif
    uint gn = px0 + i, base;
    int h0, w0;
    col_of(min(gn, N - 1u), base, h0, w0);
    cols.base[i] = base, cols.h0[i] = h0, cols.w0[i] = w0, cols.ok[i] = gn < N;
  }

  vec4 acc[TM][TN / 4u];
  for (uint i = 0u; i < TM; ++i)
    for (uint j = 0u; j < TN / 4u; ++j) acc[i][j] = vec4(0.0);

  for (uint k0 = 0u; k0 < K; k0 += BK) {
    // The tile's rows (kk, m4) at k rows kka + i*KSA, then its columns.
    for (uint kk = kka; kk < BK; kk += KSA)
      As[kk * QA + m4a] = TALL ? load_pixels(cols, k0 + kk, K, kbeg)
                               : load_channels(rowb, rowok, k0 + kk, K, kbeg);
    for (uint kk = kkb; kk < BK; kk += KSB)
      Bs[kk * QB + n4b] = TALL ? load_channels(rowb, rowok, k0 + kk, K, kbeg)
                               : load_pixels(cols, k0 + kk, K, kbeg);
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

  // The epilogue: C (channel, pixel) to its place in the output: the
  // pixel's base plus the channel times ld. Rows outer, as gemm.comp (the
  // accumulators read in the order they are laid out: CPU drivers keep
  // them in registers only so).
  uint Mi = TALL ? N : M, Ni = TALL ? M : N;
  uint gn0 = n0 + TN * tx, dst[TN];
  if (!TALL)
    for (uint j = 0u; j < TN; ++j) dst[j] = pixel_base(min(gn0 + j, N - 1u));
  for (uint i = 0u; i < TM; ++i) {
    uint gm = m0 + TM * ty + i;
    if (gm >= Mi) continue;
    uint row_base = TALL ? pixel_base(gm) : 0u;
    for (uint j = 0u; j < TN; ++j) {
      uint gn = gn0 + j;
      if (gn >= Ni) continue;
      uint ch = TALL ? gn : gm;
      float v = acc[i][j / 4u][j % 4u];
#if CONV_MODE == 0
      if ((p.flags & 16u) != 0u) v += F(3)[O(3) + grp * OCg + ch];  // has_bias, specialized
      v = unary_apply(p.op, v);  // p.op = SPEC_OP = act
#endif
      F(0)[(TALL ? row_base : dst[j]) + ch * LD] = v;
    }
  }
}
