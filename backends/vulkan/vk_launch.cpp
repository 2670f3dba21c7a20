// Launch translation (see vk_launch.h).
#include "vk_launch.h"

#include <algorithm>
#include <cstring>

#include "switchyard/dtype.h"
#include "switchyard/error.h"
#include "vk_instance.h"

namespace switchyard::vk_impl {
namespace {

// Grid-stride kernels get at most c.grid_cap workgroups: each invocation
// then loops over several items, so per-invocation set-up (reading the
// launch's parameters) is paid once per many elements.
uint32_t groups_for(const LaunchConfig& c, uint64_t items) {
return uint32_t(std::clamp<uint64_t>((items + c.wg - 1) / c.wg, 1, c.grid_cap));
}

// Grid size of one launch (see each shader's header for its geometry).
}  // namespace

void launch_grid(const LaunchConfig& c, const Instr& ins, uint32_t flags, uint32_t g[3]) {
  const int64_t* i = ins.params.i;
  g[1] = g[2] = 1;
  auto quads = [](int64_t n) { return uint64_t(n + 3) / 4; };
  switch (ins.kernel) {
    case Kernel::fill: g[0] = groups_for(c, quads(i[0])); break;
    case Kernel::affine:
    case Kernel::unary:
    case Kernel::unary_backward:
    case Kernel::sgd_update:
    case Kernel::adam_update: g[0] = groups_for(c, quads(i[0])); break;
    case Kernel::binary: g[0] = groups_for(c, quads(i[0] * i[1] * i[2] * i[3])); break;
    case Kernel::arange:
    case Kernel::rand_uniform:
    case Kernel::rand_normal:
    case Kernel::cast: g[0] = groups_for(c, uint64_t(i[0])); break;
    case Kernel::transpose: g[0] = groups_for(c, uint64_t(i[0] * i[1])); break;
    case Kernel::pad: g[0] = groups_for(c, uint64_t(i[2])); break;
    case Kernel::expand: g[0] = groups_for(c, uint64_t(i[0] * i[1] * i[2])); break;
    case Kernel::reduce_sum:
      g[0] = i[2] == 1 ? uint32_t(std::clamp<int64_t>(i[0], 1, c.grid_cap))
                       : groups_for(c, uint64_t(i[0] * i[2]));
      break;
    case Kernel::softmax:
    case Kernel::softmax_backward: g[0] = uint32_t(std::clamp<int64_t>(i[0], 1, c.grid_cap)); break;
    case Kernel::cross_entropy: g[0] = 1; break;
    case Kernel::cross_entropy_backward:
    case Kernel::argmax: g[0] = groups_for(c, uint64_t(i[0])); break;
    case Kernel::gemm: {
      const auto& t = flags & kSmallTiles ? c.gemm_small : c.gemm;
      uint64_t gx = (uint64_t(i[1]) + t[1] - 1) / t[1], gy = (uint64_t(i[0]) + t[0] - 1) / t[0];
      SY_CHECK(gx <= kMaxGroups && gy <= kMaxGroups, "gemm", "expected at most ", kMaxGroups * t[0],
               " rows and columns on ", c.device, ", found ", i[0], "x", i[1]);
      g[0] = uint32_t(std::max<uint64_t>(gx, 1));
      g[1] = uint32_t(std::max<uint64_t>(gy, 1));
      break;
    }
    case Kernel::count_: g[0] = 1; break;
  }
}

namespace {

bool writes(const Instr& ins, int a) {
  if (a == 0) return true;
  if (ins.kernel == Kernel::adam_update) return a <= 2;
  if (ins.kernel == Kernel::sgd_update) return a == 1 && ins.params.i[3] != 0;
  return false;
}

// The binding an argument goes to: its position, except SGD without
// momentum, whose gradient (arg 1) goes to binding 2 like with momentum.
uint32_t binding_of(const Instr& ins, int a) {
  if (ins.kernel == Kernel::sgd_update && ins.params.i[3] == 0 && a == 1) return 2;
  return uint32_t(a);
}

}  // namespace

// The table entry of one launch (32-bit params, offsets from each
// descriptor's start), its arguments' descriptors (kArgBindings, unused
// bindings alias argument 0) and the ranges it touches.
OpParams launch_params(const LaunchConfig& c, std::span<const Block> blocks, const Instr& ins,
                     std::span<const Binding> bind, VkDescriptorBufferInfo* desc, Range* ranges, int& nranges) {
  OpParams o{};
  bool aligned = true;
  const uint64_t align = c.storage_align;
  nranges = 0;
  uint32_t used = 0;
  for (int a = 0; a < ins.nargs; ++a) {
    const Binding& b = bind[ins.args[a].slot];
    auto* al = static_cast<const Alloc*>(b.buffer.handle);
    uint64_t off = al->offset + b.offset + ins.args[a].offset;
    uint64_t len = ins.args[a].bytes ? ins.args[a].bytes : b.buffer.bytes - b.offset - ins.args[a].offset;
    // The descriptor starts at an allowed alignment at or below the
    // argument and ends on a 4-byte boundary (u8 tensors are read as words).
    uint64_t start = off & ~(align - 1);
    uint64_t end = std::min<uint64_t>((off + std::max<uint64_t>(len, 1) + 15) & ~uint64_t(15),
                                      blocks[al->block].size);
    SY_CHECK(end - start <= c.max_range, kernel_name(ins.kernel), "expected each argument to span at most ",
             mib(c.max_range), " (maxStorageBufferRange of ", c.device, "), found ", end - start,
             " bytes: split the tensor");
    uint32_t bi = binding_of(ins, a);
    used |= 1u << bi;
    desc[bi] = {blocks[al->block].buf, start, end - start};
    o.off[bi] = uint32_t(off - start);
    aligned = aligned && off % 16 == 0;
    ranges[nranges++] = {al->block, start, end, writes(ins, a)};
  }
  for (uint32_t bi = 0; bi < kArgBindings; ++bi)
    if (!(used & (1u << bi))) desc[bi] = desc[0], o.off[bi] = o.off[0];
  if (ins.kernel == Kernel::cross_entropy || ins.kernel == Kernel::cross_entropy_backward)
    ranges[nranges++] = {kStatusId, 0, 4, true};
  // The RNG's seed words (i[1], i[2]) are 32-bit patterns and its offset
  // (i[3]) is 64-bit: it travels as i[3] (low) and i[4] (high).
  bool rng = ins.kernel == Kernel::rand_uniform || ins.kernel == Kernel::rand_normal;
  for (int j = 0; j < 12; ++j) {
    int64_t v = ins.params.i[j];
    if (rng && j >= 1 && j <= 4) continue;
    SY_CHECK(v >= INT32_MIN && v <= INT32_MAX, kernel_name(ins.kernel), "expected parameters that fit "
             "32 bits on ", c.device, ", found i[", j, "] = ", v);
    o.i[j] = int32_t(v);
  }
  if (rng) {
    uint64_t off64 = uint64_t(ins.params.i[3]);
    o.i[1] = int32_t(uint32_t(uint64_t(ins.params.i[1])));
    o.i[2] = int32_t(uint32_t(uint64_t(ins.params.i[2])));
    o.i[3] = int32_t(uint32_t(off64));
    o.i[4] = int32_t(uint32_t(off64 >> 32));
  }
  std::memcpy(o.f, ins.params.f, sizeof o.f);
  // vec4 access: every argument 16-byte aligned, and f32 (fill's dtype varies).
  if (ins.kernel == Kernel::fill && ins.params.i[1] != int64_t(DType::f32)) aligned = false;
  o.flags = aligned ? 1u : 0u;
  if (ins.kernel == Kernel::binary) {
    // Plain vec4 loop when a and b are laid out exactly like out.
    const int64_t* d = ins.params.i;
    int64_t st[4] = {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
    bool flat = true;
    for (int j = 0; j < 4; ++j)
      flat = flat && (d[j] == 1 || (d[4 + j] == st[j] && d[8 + j] == st[j]));
    if (flat) o.flags |= 2u;
  }
  if (ins.kernel == Kernel::gemm) {
    const int64_t* d = ins.params.i;  // M N K ta tb has_bias
    int64_t lda = d[3] ? d[0] : d[2], ldb = d[4] ? d[2] : d[1];
    if (o.off[1] % 16 == 0 && lda % 4 == 0) o.flags |= 4u;
    if (o.off[2] % 16 == 0 && ldb % 4 == 0) o.flags |= 8u;
    if (d[5]) o.flags |= 16u;
    uint64_t big = ((uint64_t(d[1]) + c.gemm[1] - 1) / c.gemm[1]) * ((uint64_t(d[0]) + c.gemm[0] - 1) / c.gemm[0]);
    if (big < 2 && c.gemm_small != c.gemm) o.flags |= kSmallTiles;
  }
  // Row kernels: rows of whole vec4s, every argument 16-byte aligned.
  if ((ins.kernel == Kernel::softmax && ins.params.i[1] % 4 == 0) ||
      (ins.kernel == Kernel::reduce_sum && ins.params.i[2] == 1 && ins.params.i[1] % 4 == 0))
    if (aligned) o.flags |= 2u;
  if (ins.kernel == Kernel::sgd_update) {
    if (ins.params.i[3]) o.flags |= 32u;  // momentum buffer
    if (ins.params.i[1]) o.flags |= 64u;  // nesterov
  }
  o.op = spec_op(ins);
  return o;
}

uint64_t pipeline_key(Kernel k, bool sg, int32_t spec_op, uint32_t flags) {
  return uint64_t(k) | uint64_t(sg) << 8 | uint64_t(uint32_t(spec_op) & 0xffff) << 16 | uint64_t(flags) << 32;
}

// The kernel's mode, as SPEC_OP documents it.
int32_t spec_op(const Instr& ins) {
  const int64_t* i = ins.params.i;
  switch (ins.kernel) {
    case Kernel::gemm: return int32_t(i[6]);
    case Kernel::fill:
    case Kernel::arange: return int32_t(i[1]);
    case Kernel::cast: return int32_t(i[1] * 4 + i[2]);
    case Kernel::transpose: return int32_t(i[2]);
    default: return ins.params.op;
  }
}

}  // namespace switchyard::vk_impl
