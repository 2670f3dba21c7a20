// SPDX-License-Identifier: MIT
// Shared declarations for every Switchyard compute shader.
//
// Binding model: a launch gets one descriptor set. Bindings 0-4 are its
// buffer arguments, each bound to exactly the range it reads or writes (so
// the validation layer's synchronization checks see true ranges); each shader
// declares the ones it uses with ARG_RO (read) or ARG_RW (written). Binding 5
// is the launch's entry in the launch table (a uniform block): the kernel
// table's scalar params plus each argument's byte offset from its
// descriptor's (aligned) start. Shaders read the params through the struct
// and loader generated for their kernel (kernel_params.glsl, from the C++
// kernel table): e.g. `SoftmaxParams q = load_SoftmaxParams();`. The host rewrites the table before each
// submission, so a recorded command buffer stays valid when the scalars
// change. Binding 6 is a status word kernels set when they find bad input;
// the host turns it into an exception.
#extension GL_GOOGLE_include_directive : require
#ifdef SY_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(constant_id = 0) const uint WG = 256;  // workgroup size (x)
layout(local_size_x_id = 0) in;

#define ARG_RW(n)                                                     \
  layout(set = 0, binding = n) buffer A##n##F { float d[]; } a##n##f; \
  layout(set = 0, binding = n) buffer A##n##V { vec4 d[]; } a##n##v;  \
  layout(set = 0, binding = n) buffer A##n##I { int d[]; } a##n##i;   \
  layout(set = 0, binding = n) buffer A##n##U { uint d[]; } a##n##u;
#define ARG_RO(n)                                                              \
  layout(set = 0, binding = n) readonly buffer A##n##F { float d[]; } a##n##f; \
  layout(set = 0, binding = n) readonly buffer A##n##V { vec4 d[]; } a##n##v;  \
  layout(set = 0, binding = n) readonly buffer A##n##I { int d[]; } a##n##i;   \
  layout(set = 0, binding = n) readonly buffer A##n##U { uint d[]; } a##n##u;

// Specialization: the backend builds a pipeline per kernel and per value of
// these two, so whatever they select is settled when the pipeline is
// compiled. Drivers that run both sides of a branch under a mask (CPU
// drivers do) then run only the code a launch needs. SPEC_OP is the
// kernel's mode (the op code; the activation for gemm; the dtype for fill and
// arange; from*4+to for cast; the element size for transpose), SPEC_FLAGS
// the launch's flags (bit 0: every argument 16-byte aligned; others per
// kernel). load_op() reads both from here, not from the table.
layout(constant_id = 10) const int SPEC_OP = 0;
layout(constant_id = 11) const uint SPEC_FLAGS = 0u;
#define ALIGNED4 ((SPEC_FLAGS & 1u) != 0u)
// The passes of a reduction split in two (vk_launch.h's kPartials and
// kFinish): the first writes partial results to the scratch, bound at
// binding 4, the second adds them in a fixed order.
#define SY_PARTIALS 256u
#define SY_FINISH 512u

// The launch's table entry: a uniform block bound at this launch's entry
// (128 bytes, std140; mirrors OpParams in vk_launch.h). Uniform reads at
// constant offsets are cheap everywhere (one scalar load on CPU drivers).
layout(set = 0, binding = 5) uniform OpBlock {
  uvec4 u_off;    // byte offset of arguments 0-3 from their binding's start
  uvec4 u_misc;   // offset of argument 4, flags, op, aux
  ivec4 u_i[4];   // integer parameter slots (32-bit)
  vec4 u_f[2];    // float parameter slots
#ifdef SY_MULTI_TABLE
  // A multi-tensor launch's tensors (vk_launch.h's MultiEntry, two uvec4
  // each), right after the entry: SY_MULTI_TABLE of them at most.
  uvec4 u_multi[2 * SY_MULTI_TABLE];
#endif
};
#include "kernel_params.glsl"
// Only the kernels that check their input declare STATUS.
#define STATUS layout(set = 0, binding = 6) buffer Status { uint status[]; };

// The launch itself: where its arguments start, its flags and its mode.
struct Op {
  uint off[5];
  uint flags;   // = SPEC_FLAGS
  int op;       // = SPEC_OP
  uint aux;     // a split reduction's parts (vk_launch.h's Launch::aux)
};
Op load_op() {
  Op p;
  p.off[0] = u_off.x; p.off[1] = u_off.y; p.off[2] = u_off.z; p.off[3] = u_off.w;
  p.off[4] = u_misc.x;
  p.flags = SPEC_FLAGS;  // the table holds them too (u_misc.yz), for debugging
  p.op = SPEC_OP;
  p.aux = u_misc.w;
  return p;
}

// Views of argument a: element arrays and the argument's start in elements.
#define F(n) a##n##f.d
#define I(n) a##n##i.d
#define U(n) a##n##u.d
#define V(n) a##n##v.d
#define O(a) (p.off[a] >> 2)
#define VO(a) (p.off[a] >> 4)

// No shader makes an infinity or a NaN by arithmetic (-1.0 / 0.0, 0.0 / 0.0):
// without shaderSignedZeroInfNanPreserveFloat32 a driver may assume there
// are none and fold or reorder such expressions. Maxima start from the
// lowest finite float; a value that must read as NaN (a bad label's loss, a
// bad index's row) is stored as NaN's bits through the integer view, which
// no float mode alters, and the status word says why.
#define SY_FLT_LOWEST (-3.4028234663852886e38)
#define SY_NAN_BITS 0x7fc00000

// Status bits, read back by the host after each submission completes.
#define SY_STATUS_BAD_LABEL 1u
#define SY_STATUS_BAD_INDEX 2u

// Row kernels (softmax, cross-entropy, their backwards, argmax, row sums):
// flag bit 10 (vk_launch.h's kRowGroups) makes each row a workgroup's, with
// workgroup reductions; without it each row is one invocation's. The host
// picks by row length and device (LaunchConfig::short_row): on a GPU a short
// row costs less than a workgroup's barriers; on a CPU driver barriers cost
// more than all but the longest rows.
#define SY_ROW_GROUPS ((SPEC_FLAGS & 1024u) != 0u)

#ifdef SY_QDIV
// floor(a / b) from inv = 1.0 / float(b), corrected once each way: exact
// for a < 2^22 (the host has kernels with larger dividends divide, by a
// flag): a/b < 2^21 for b >= 2, so inv's error (Vulkan allows 2.5 ulp for
// a division) and the product's rounding move the estimate by under 1;
// b = 1 is taken as is. CPU drivers divide integer vectors one lane at a
// time, and GPUs have no integer divider: this is a few vector multiplies.
uint udiv_rcp(uint a, uint b, float inv) {
  if (b == 1u) return a;
  uint q = uint(float(a) * inv);
  q += (q + 1u) * b <= a ? 1u : 0u;
  q -= q * b > a ? 1u : 0u;
  return q;
}
// Flag bit 2 (value 4) of the kernels that define SY_QDIV (conv_gemm.glsl,
// channel_affine, channel_stats, channel_sums, max_pool2d and its
// backward; vk_launch.cpp's reciprocal_flag): their
// dividends reach 2^22, so they divide integers. (Other kernels use the
// bit otherwise: gemm's vec4 loads of A.)
#define SY_EXACT_DIV ((SPEC_FLAGS & 4u) != 0u)
uint qdiv(uint a, uint b, float inv) { return SY_EXACT_DIV ? a / b : udiv_rcp(a, b, inv); }
#endif

// Grid-stride loop over `n` items (one invocation per item, any grid size).
#define FOR_ITEMS(k, n) for (uint k = gl_GlobalInvocationID.x; k < uint(n); k += gl_NumWorkGroups.x * WG)

// An elementwise kernel over n elements: vec_item(p, k) computes vec4
// number k, one_item(p, j) element j (both defined by the shader; they read
// the kernel's params from a global the shader sets before the loop). When every
// argument is 16-byte aligned (the same answer for the whole launch, so all
// invocations take one path) the launch runs vec4s, and invocation 0 the
// remainder; otherwise each invocation takes 4 consecutive elements.
#define ELEMENTWISE(p, n)                                                      \
  if (ALIGNED4) {                                                              \
    uint n4_ = (n) / 4u;                                                       \
    FOR_ITEMS(k_, n4_) vec_item(p, k_);                                        \
    if (gl_GlobalInvocationID.x == 0u)                                         \
      for (uint j_ = 4u * n4_; j_ < (n); ++j_) one_item(p, j_);                \
  } else {                                                                     \
    FOR_ITEMS(k_, ((n) + 3u) / 4u)                                             \
      for (uint j_ = 4u * k_; j_ < min(4u * k_ + 4u, (n)); ++j_) one_item(p, j_); \
  }

// u8 tensors live in 32-bit words: byte b (offset from binding n's start).
#define LOAD_U8(n, b) ((U(n)[(b) >> 2] >> (((b) & 3u) * 8u)) & 0xffu)
#define STORE_U8(n, b, v)                                   \
  {                                                         \
    uint b_ = (b), s_ = (b_ & 3u) * 8u;                     \
    atomicAnd(U(n)[b_ >> 2], ~(0xffu << s_));               \
    atomicOr(U(n)[b_ >> 2], (uint(v) & 0xffu) << s_);       \
  }

// i64 tensors live in pairs of 32-bit words, (low, high), element j at
// words 2j and 2j + 1 from the binding's start (little-endian, as the
// host); no shaderInt64 needed. Conversions match the CPU's
// (backends/common/pointwise.h): f32 -> i64 truncates and saturates, i64 ->
// i32 saturates, i64 -> u8 keeps the low byte.
ivec2 i64_from_float(float v) {
  if (abs(v) < 2147483648.0) { int i = int(v); return ivec2(i, i < 0 ? -1 : 0); }
  if (v >= 9.2233720368547758e18) return ivec2(-1, 2147483647);
  if (v <= -9.2233720368547758e18) return ivec2(0, -2147483647 - 1);
  // |v| >= 2^31 is an integer with 8 or more trailing zero bits: both
  // halves are exact in float.
  float h = floor(v / 4294967296.0);
  return ivec2(int(uint(v - h * 4294967296.0)), int(h));
}
// Rounded once, as the CPU's float(int64_t): the magnitude's top 32 bits,
// with a sticky bit for any lower ones, converted and scaled.
float i64_to_float(ivec2 w) {
  if (w.y == (w.x >> 31)) return float(w.x);  // within i32
  const bool neg = w.y < 0;
  uint lo = uint(w.x), hi = uint(w.y);
  if (neg) {  // two's-complement negation across both words
    lo = ~lo + 1u;
    hi = ~hi + (lo == 0u ? 1u : 0u);
  }
  float f;
  if (hi == 0u) {
    f = float(lo);
  } else {
    const int s = findMSB(hi) + 1;  // bits of lo shifted out: 1..32
    uint top = s == 32 ? hi : (hi << uint(32 - s)) | (lo >> uint(s));
    uint rest = s == 32 ? lo : lo << uint(32 - s);
    if (rest != 0u) top |= 1u;
    f = ldexp(float(top), s);
  }
  return neg ? -f : f;
}
int i64_to_i32(ivec2 w) {
  return w.y == (w.x >> 31) ? w.x : (w.y < 0 ? -2147483647 - 1 : 2147483647);
}

// 16-bit floats (bf16, f16) live in 32-bit words, as u8 does: element j of
// argument n is halfword (p.off[n] / 2 + j) of its binding, the low half of
// a word first (little-endian, as the host). No 16-bit storage feature is
// needed. The conversions are pointwise.h's, in integer operations, so every
// device gives the CPU's bits: widening is exact, narrowing rounds to
// nearest even, NaN stays a quiet NaN, f16 overflows to infinity at 65520.
#define LOAD_U16(n, h) ((U(n)[(h) >> 1] >> (((h) & 1u) * 16u)) & 0xffffu)
// Word w of argument n from the halves lo and hi; has_lo / has_hi say which
// halves belong to the tensor written (a half of another tensor in the same
// word is kept, atomically, as STORE_U8 keeps bytes).
#define STORE_U16_PAIR(n, w, lo, hi, has_lo, has_hi)                \
  if ((has_lo) && (has_hi)) {                                       \
    U(n)[w] = (lo) | ((hi) << 16);                                  \
  } else if (has_lo) {                                              \
    atomicAnd(U(n)[w], 0xffff0000u);                                \
    atomicOr(U(n)[w], (lo));                                        \
  } else if (has_hi) {                                              \
    atomicAnd(U(n)[w], 0x0000ffffu);                                \
    atomicOr(U(n)[w], (hi) << 16);                                  \
  }
// A kernel writing count halves from halfword h0 goes a word at a time:
// FOR_ITEMS(i, half_words(h0, count)) { uint w = (h0 >> 1) + i; int j =
// int(2u * w) - int(h0); ... } has element j in the low half and j + 1 in
// the high one (either may fall outside [0, count): HALF_IN).
uint half_words(uint h0, uint count) { return ((h0 + count + 1u) >> 1) - (h0 >> 1); }
#define HALF_IN(j, count) ((j) >= 0 && (j) < int(count))

uint bf16_to_f32_bits(uint h) { return h << 16; }
float bf16_to_f32(uint h) { return uintBitsToFloat(h << 16); }
// Narrowing from f32 bits (a kernel that only converts reads them through
// the integer view: no float mode can flush a subnormal on the way).
uint f32_bits_to_bf16(uint u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // quiet NaN
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
uint f32_to_bf16(float f) { return f32_bits_to_bf16(floatBitsToUint(f)); }
// The f32 bits of an f16 (widening moves infinities and NaNs as bits: a
// kernel that only converts stores them through the integer view).
uint f16_to_f32_bits(uint h) {
  uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0u) return floatBitsToUint(float(m) * 5.9604644775390625e-8) | s;
  if (e == 31u) return s | 0x7f800000u | (m << 13);
  return s | ((e + 112u) << 23) | (m << 13);
}
float f16_to_f32(uint h) { return uintBitsToFloat(f16_to_f32_bits(h)); }
uint f32_bits_to_f16(uint u) {
  uint s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return s | 0x7e00u | ((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) return s | 0x7c00u;
  if (a >= 0x38800000u) {
    uint r = a - 0x38000000u;
    return s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
  }
  if (a < 0x33000000u) return s;
  precise float x = uintBitsToFloat(a) * 16777216.0;
  uint m = uint(x);
  precise float rest = x - float(m);
  if (rest > 0.5 || (rest == 0.5 && (m & 1u) == 1u)) ++m;
  return s | m;
}
uint f32_to_f16(float f) { return f32_bits_to_f16(floatBitsToUint(f)); }
// dtype codes (DType's order): 0 f32, 1 i32, 2 u8, 3 i64, 4 bf16, 5 f16.
#define DT_BF16 4
#define DT_F16 5
uint half_to_f32_bits(int dt, uint h) { return dt == DT_BF16 ? bf16_to_f32_bits(h) : f16_to_f32_bits(h); }
float half_to_f32(int dt, uint h) { return uintBitsToFloat(half_to_f32_bits(dt, h)); }
uint f32_to_half(int dt, float f) { return dt == DT_BF16 ? f32_to_bf16(f) : f32_to_f16(f); }
uint f32_bits_to_half(int dt, uint u) { return dt == DT_BF16 ? f32_bits_to_bf16(u) : f32_bits_to_f16(u); }

const float kGeluC = 0.7978845608028654;

// tanh that stays finite for large |x| (some drivers compute it from exp).
float sy_tanh(float x) { return abs(x) > 15.0 ? sign(x) : tanh(x); }

float unary_apply(int op, float x) {
  switch (op) {
    case U_RELU: return x > 0.0 ? x : 0.0;
    case U_GELU: return 0.5 * x * (1.0 + sy_tanh(kGeluC * (x + 0.044715 * x * x * x)));
    case U_TANH: return sy_tanh(x);
    case U_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_SQUARE: return x * x;
    case U_ABS: return abs(x);
    // On the bits: a driver may assume no infinities or NaNs in float math.
    case U_NONFINITE: return (floatBitsToUint(x) & 0x7f800000u) == 0x7f800000u ? 1.0 : 0.0;
  }
  return x;
}

vec4 unary_apply4(int op, vec4 x) {
  if (op == U_RELU) return max(x, vec4(0.0));
  return vec4(unary_apply(op, x.x), unary_apply(op, x.y), unary_apply(op, x.z), unary_apply(op, x.w));
}
