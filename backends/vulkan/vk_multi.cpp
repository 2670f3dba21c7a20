// SPDX-License-Identifier: MIT
// Multi-tensor launches (adam_multi, sgd_multi): the tensors of one
// optimizer step in as few launches as the device's bindings allow (see
// vk_launch.h).
//
// Tensors are suballocated from a few large blocks (vk_allocator.h), so the
// arguments of a step's parameters, their states and their gradients lie in
// few blocks: a launch binds a window of each block it needs (up to
// kMultiWindows, each within maxStorageBufferRange) instead of a
// descriptor per tensor, and reaches each tensor through its table. Core
// Vulkan 1.0 only: no descriptor arrays, no descriptor indexing, no buffer
// device addresses (a shader picks a window with a switch on a value that is
// the same across its workgroup).
//
// Loops: an update invocation runs 5 iterations per piece it takes (pieces
// over at most grid_cap workgroups) and scans the table once, far within
// llvmpipe's loop budget for any tensor list that fits the device.
#include <algorithm>

#include "switchyard/error.h"
#include "vk_launch.h"

namespace switchyard::vk_impl {
namespace {

// A tensor's argument slots: written ones from 0 (adam_multi: p, m, v, step;
// sgd_multi: p[, buf]), its gradient (read) in the last; a MultiEntry's
// off[0..3] and off_g, and its 3-bit window fields in that order.
constexpr int kPerTensor = 5;
constexpr int kGradSlot = kPerTensor - 1;

struct Window {
  uint32_t block = 0;
  uint64_t lo = 0, hi = 0;
  bool write = false;
};

struct Where {
  uint32_t block;
  uint64_t off, len;
};

// Slot k of tensor t: the instruction's more_args hold the written
// arguments of each tensor in turn, then each tensor's g.
const Arg& multi_arg(const Program& prog, const Instr& ins, const MultiLayout& L, int64_t t,
                     int k) {
  const int64_t W = L.written;
  return prog.more_args[ins.more + size_t(k == kGradSlot ? W * L.tensors + t : W * t + k)];
}
// Whether tensor slot k is one of the kernel's arguments.
bool used(const MultiLayout& L, int k) { return k == kGradSlot || k < L.written; }

// A multi-tensor argument's bytes are its tensor's, as given: 0 is an empty
// tensor (not, as elsewhere, the rest of the buffer).
Where where(std::span<const Binding> bind, const Arg& a) {
  const Binding& b = bind[a.slot];
  auto* al = static_cast<const Alloc*>(b.buffer.handle);
  return {al->block, al->offset + b.offset + a.offset, a.bytes};
}

// Windows start at the device's storage-buffer alignment and end on 16
// bytes, within the block; room: the most one binding may span,
// maxStorageBufferRange (0: any). Chunks are cut at binding_room, which
// leaves space for a window's alignment below a chunk that starts off it.
struct Fitter {
  const LaunchConfig& c;
  std::span<const Block> blocks;
  uint64_t room;
  Window w[kMultiWindows];
  int n = 0;
  // Adds the arguments of one tensor to the windows if they all fit
  // (widening a window of the same block, or opening one); else changes
  // nothing and returns false. idx: each argument's window (0 for the
  // slots `L` leaves unused).
  bool add(const MultiLayout& L, const Where (&a)[kPerTensor], uint32_t* idx) {
    Window t[kMultiWindows];
    std::copy(w, w + n, t);
    int m = n;
    const uint64_t align = std::max<uint64_t>(c.storage_align, 4);
    for (int k = 0; k < kPerTensor; ++k) {
      idx[k] = 0;
      if (!used(L, k)) continue;
      const uint64_t lo = a[k].off & ~(align - 1);
      const uint64_t hi =
          std::min<uint64_t>((a[k].off + std::max<uint64_t>(a[k].len, 1) + 15) & ~uint64_t(15),
                             blocks[a[k].block].size);
      const bool write = k != kGradSlot;
      int at = -1;
      for (int j = 0; j < m && at < 0; ++j) {
        if (t[j].block != a[k].block) continue;
        const uint64_t l = std::min(t[j].lo, lo), h = std::max(t[j].hi, hi);
        if (room == 0 || h - l <= room) at = j, t[j].lo = l, t[j].hi = h;
      }
      if (at < 0) {
        if (m == int(kMultiWindows) || (room && hi - lo > room)) return false;
        at = m++;
        t[at] = {a[k].block, lo, hi, false};
      }
      t[at].write = t[at].write || write;
      idx[k] = uint32_t(at);
    }
    std::copy(t, t + m, w);
    n = m;
    return true;
  }
};

// A tensor, or a chunk of one that passes a binding (all of one chunk's
// arguments fit one binding each): elements [lo, lo + n) of tensor t.
struct Item {
  int64_t t;
  uint64_t lo, n;
};

// The items of a multi-tensor instruction in order, from (tensor, chunk):
// chunks of `chunk` elements (0: whole tensors).
struct Items {
  const Program& prog;
  const Instr& ins;
  std::span<const Binding> bind;
  uint64_t chunk;
  MultiLayout L = multi_layout(ins.params);
  int64_t T = L.tensors;
  // adam_multi's slot 3: the step count, one element, not cut.
  bool step_slot = ins.kernel == Kernel::adam_multi;

  uint64_t elements(int64_t t) const { return where(bind, multi_arg(prog, ins, L, t, 0)).len / 4; }
  // The item at (t, c), or false past the last chunk of the last tensor.
  bool at(int64_t t, uint64_t c, Item& it) const {
    if (t >= T) return false;
    const uint64_t n = elements(t);
    if (chunk == 0) {
      it = {t, 0, n};
      return c == 0;
    }
    const uint64_t lo = c * chunk;
    if (lo >= n && !(n == 0 && c == 0)) return false;
    it = {t, lo, std::min(chunk, n - lo)};
    return true;
  }
  void next(int64_t& t, uint64_t& c) const {
    const uint64_t n = elements(t);
    if (chunk == 0 || (c + 1) * chunk >= n)
      ++t, c = 0;
    else
      ++c;
  }
  void args(const Item& it, Where (&a)[kPerTensor]) const {
    for (int k = 0; k < kPerTensor; ++k) {
      a[k] = {};
      if (!used(L, k)) continue;
      a[k] = where(bind, multi_arg(prog, ins, L, it.t, k));
      if (k == 3 && step_slot) continue;
      a[k].off += it.lo * 4;
      a[k].len = it.n * 4;
    }
  }
};

// Elements of a chunk: a whole binding's (0: no limit).
uint64_t chunk_elements(const LaunchConfig& c) { return binding_room(c) / 16 * 4; }

}  // namespace

void plan_multi(const LaunchConfig& c, std::span<const Block> blocks, const Program& prog,
                std::span<const Binding> bind, std::vector<Launch>& launches,
                std::vector<Launch>& tmp) {
  if (std::none_of(launches.begin(), launches.end(),
                   [](const Launch& l) { return kernel_has(l.ins->kernel, kMultiTensor); }))
    return;
  tmp.clear();
  for (const Launch& l : launches) {
    if (!kernel_has(l.ins->kernel, kMultiTensor)) {
      tmp.push_back(l);
      continue;
    }
    SY_CHECK(l.ins->kernel == Kernel::adam_multi || l.ins->kernel == Kernel::sgd_multi,
             kernel_name(l.ins->kernel),
             "expected a multi-tensor kernel this backend knows, found another (internal error)");
    const Items items{prog, *l.ins, bind, chunk_elements(c)};
    // Every group's update first, then every group's step counts: a tensor
    // cut into chunks across groups reads its count before any writes it.
    const size_t updates = tmp.size();
    int64_t t = 0;
    uint64_t ch = 0;
    Item it;
    while (items.at(t, ch, it)) {
      Fitter f{c, blocks, c.max_range};
      Launch u = l;
      u.first = uint32_t(t), u.aux = uint32_t(ch), u.count = 0, u.extra_flags = 0;
      for (; u.count < kMaxMultiTensors && items.at(t, ch, it); items.next(t, ch), ++u.count) {
        Where a[kPerTensor];
        uint32_t idx[kPerTensor];
        items.args(it, a);
        if (!f.add(items.L, a, idx)) break;
      }
      SY_CHECK(u.count > 0, kernel_name(l.ins->kernel),
               "expected a chunk's arguments to fit the bindings on ", c.device,
               " (internal error)");
      tmp.push_back(u);
    }
    // (adam_multi's; sgd_multi has no step counts.)
    const size_t groups = items.step_slot ? tmp.size() - updates : 0;
    for (size_t g = 0; g < groups; ++g) {
      Launch f = tmp[updates + g];
      f.extra_flags = kFinish;
      tmp.push_back(f);
    }
  }
  launches.swap(tmp);
}

OpParams multi_params(const LaunchConfig& c, std::span<const Block> blocks, const Program& prog,
                      const Launch& l, std::span<const Binding> bind, MultiEntry* table,
                      VkDescriptorBufferInfo* desc, Range* ranges, int& nranges) {
  const Instr& ins = *l.ins;
  const Items items{prog, ins, bind, chunk_elements(c)};
  Fitter f{c, blocks, c.max_range};
  Where a[kMaxMultiTensors][kPerTensor];
  uint32_t idx[kMaxMultiTensors][kPerTensor];
  Item it[kMaxMultiTensors];
  int64_t t = l.first;
  uint64_t ch = l.aux;
  for (uint32_t i = 0; i < l.count; ++i, items.next(t, ch)) {
    SY_CHECK(items.at(t, ch, it[i]), kernel_name(ins.kernel),
             "expected the items plan_multi grouped (internal error)");
    items.args(it[i], a[i]);
    SY_CHECK(f.add(items.L, a[i], idx[i]), kernel_name(ins.kernel),
             "expected the items plan_multi grouped to fit its windows (internal error)");
  }
  const uint64_t piece = 4ull * c.wg;
  uint64_t pieces = 0;
  bool whole_vec4s = true;  // every tensor argument starts on a vec4 of its window
  for (uint32_t i = 0; i < l.count; ++i) {
    MultiEntry& e = table[i];
    e = MultiEntry{};
    for (int k = 0; k < kPerTensor; ++k) {
      if (!used(items.L, k)) continue;
      const uint64_t off = (a[i][k].off - f.w[idx[i][k]].lo) / 4;
      SY_CHECK(off <= UINT32_MAX, kernel_name(ins.kernel),
               "expected offsets within 2^32 elements on ", c.device, ", found ", off);
      (k < kGradSlot ? e.off[k] : e.off_g) = uint32_t(off);
      e.windows |= idx[i][k] << (3 * k);
      if (!(k == 3 && items.step_slot)) whole_vec4s = whole_vec4s && off % 4 == 0;
    }
    // The step count is incremented once per tensor: by its first chunk.
    if (it[i].lo == 0) e.windows |= kMultiCounts;
    SY_CHECK(it[i].n <= UINT32_MAX && pieces <= UINT32_MAX, kernel_name(ins.kernel),
             "expected at most 2^32 elements a launch on ", c.device, ", found more");
    e.n = uint32_t(it[i].n);
    e.first = uint32_t(pieces);
    pieces += ceil_div(it[i].n, piece);
  }
  nranges = 0;
  for (int j = 0; j < f.n; ++j) {
    const Window& w = f.w[j];
    desc[j] = {blocks[w.block].buf, w.lo, w.hi - w.lo};
    ranges[nranges++] = {w.block, w.lo, w.hi, w.write};
  }
  for (int j = f.n; j < int(kArgBindings); ++j) desc[j] = desc[0];
  OpParams o{};
  pack_params(c, ins.params, o);
  if (f.n == 1) o.flags |= kOneWindow | (whole_vec4s ? kMultiVec4 : 0u);
  o.off[0] = l.count;
  SY_CHECK(pieces <= UINT32_MAX, kernel_name(ins.kernel), "expected at most 2^32 pieces on ",
           c.device);
  o.aux = (l.extra_flags & kFinish) ? l.count : uint32_t(pieces);
  return o;
}

}  // namespace switchyard::vk_impl
