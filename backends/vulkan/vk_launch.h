// SPDX-License-Identifier: MIT
// How a kernel-table launch (an Instr) becomes a Vulkan dispatch: its entry
// in the launch table (OpParams), its descriptors and the memory ranges it
// reads and writes (for barriers), its pipeline specialization and its grid.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "switchyard/backend/program.h"
#include "vk_loader.h"
#include "vk_memory.h"
#include "vk_params.h"

namespace switchyard::vk_impl {

constexpr uint32_t kArgBindings = 5;            // descriptor bindings 0-4: buffer arguments
constexpr uint32_t kStatusId = UINT32_MAX - 1;  // Range id of the status word
constexpr uint32_t kSmallTiles = 128;           // gemm flag: the small tile set
// Convolution flag: the transposed orientation on the tall tiles (pixels
// as the product's rows, channels as its columns).
constexpr uint32_t kTallTiles = 2048;
// Convolution flag: the narrow tiles (a few channels by a few taps, deep:
// the weight gradient of a first layer).
constexpr uint32_t kNarrowTiles = 4096;
constexpr uint32_t kGemmAccumulate = 32;  // gemm flag: add to C (a later part of a K split)
constexpr uint32_t kLargeTiles = 65536;   // gemm flag: the large tile set (vk_gemm.h)
// gemm flag: the GPU loop, the next K slice loaded into registers while the
// current one is multiplied (shaders/gemm.comp's PREFETCH).
constexpr uint32_t kGemmPrefetch = 131072;
// gemm flags: A and B are 16-bit (GemmParams::ab_dtype), bf16 unless
// kGemmF16; read as halves of 32-bit words (shaders/gemm.comp's HALF_AB).
constexpr uint32_t kGemmHalf = 262144, kGemmF16 = 524288;
// gemm flags: C is 16-bit (GemmParams::c_dtype), bf16 unless kGemmF16C;
// stored a word at a time (shaders/gemm.comp's HALF_C).
constexpr uint32_t kGemmHalfC = 1048576, kGemmF16C = 2097152;
// A reduction split in two launches (plan_launches): the first writes
// partial results to the scratch (kPartials), the second reads them back in
// a fixed order and writes the output (kFinish). Launch flags, so each pass
// is its own pipeline specialization.
constexpr uint32_t kPartials = 256, kFinish = 512;
// Row kernels: each row is a workgroup's (shaders/common.glsl's SY_ROW_GROUPS).
constexpr uint32_t kRowGroups = 1024;
constexpr uint32_t kScratchArg = 4;     // the scratch's binding: no split kernel has five arguments
constexpr uint32_t kMaxGroups = 65535;  // workgroups per dimension we dispatch at most

// Mirrors the uniform block OpBlock in shaders/common.glsl (std140). The
// parameter slots hold the launch's typed params as vk_params.h lays them out.
struct OpParams {
  uint32_t off[5];  // byte offset from the argument's descriptor start
  uint32_t flags;
  int32_t op;
  uint32_t aux;  // a split reduction's parts (Launch::aux)
  int32_t i[kTableInts];
  float f[kTableFloats];
};
static_assert(sizeof(OpParams) == 128);

struct Range {
  uint32_t buf;  // block index, kRingId (staging ring) or kStatusId
  uint64_t begin, end;
  bool write;
};

inline bool overlaps(const Range& a, const Range& b) {
  return a.buf == b.buf && a.begin < b.end && b.begin < a.end;
}

// Ranges touched since the last barrier; conflict() says whether a new access
// must wait for them (read after write, write after read or write).
struct Hazards {
  std::vector<Range> seen;
  bool conflict(const Range& r) const {
    for (auto& s : seen)
      if (overlaps(s, r) && (s.write || r.write)) return true;
    return false;
  }
};

// What the translation needs to know of the device (set in choose_tiles).
struct LaunchConfig {
  uint32_t wg = 256;               // workgroup size of the non-GEMM kernels
  uint32_t grid_cap = kMaxGroups;  // workgroups for grid-stride kernels
  // Workgroups that keep the whole device busy: a split reduction's first
  // pass aims for at least this many.
  uint32_t fill_groups = 1024;
  // Row kernels: rows up to this long are one invocation's, longer ones a
  // workgroup's (kRowGroups).
  int64_t short_row = 64;
  // transpose through shared-memory tiles (else one invocation per element).
  bool tiled_transpose = true;
  std::array<uint32_t, 5> gemm = {64, 64, 16, 4, 4},
                          gemm_small = {32, 32, 16, 4, 4};  // BM BN BK TM TN
  // GEMM variants (vk_gemm.h): the large set and whether the device takes
  // it, the prefetching loop, and the facts split-K is chosen from: compute
  // units (0: never split unless forced, as on CPU drivers) and how many
  // workgroups of the medium, small and large set one of them holds.
  std::array<uint32_t, 5> gemm_large = {128, 128, 16, 8, 8};
  bool large_tiles = false;
  bool gemm_prefetch = false;
  uint32_t compute_units = 0;
  std::array<uint32_t, 3> gemm_resident = {4, 8, 2};
  // SWITCHYARD_VK_GEMM_VARIANT (a GemmSet; -1: chosen) and
  // SWITCHYARD_VK_GEMM_SPLIT_K (0: chosen).
  int gemm_forced_set = -1;
  uint32_t gemm_forced_splits = 0;
  // `switchyard tune`'s winners for this device and driver (vk_tune.cpp),
  // taken over the model for exactly these shapes.
  struct Tuned {
    int64_t m, n, k, batch;
    bool ta, tb;
    uint32_t set, splits;
  };
  std::vector<Tuned> tuned;
  // The convolutions' transposed tiles: many pixels by few channels (a
  // product whose channel side is 32 or 64 wastes most of a square tile).
  // conv_tall: whether they may be used (the subgroup build fits them).
  std::array<uint32_t, 5> gemm_tall = {128, 32, 16, 8, 4};
  bool conv_tall = true;
  // The convolutions' narrow tiles: a product with both sides 32 or under
  // (a first layer's weight gradient: 32 channels by 9 taps, K the batch's
  // pixels) in tiles of 32 x 32. conv_narrow: whether they may be used.
  std::array<uint32_t, 5> gemm_narrow = {32, 32, 16, 4, 4};
  bool conv_narrow = false;
  // Launches of the kernels that divide by reciprocals (common.glsl's
  // SY_QDIV) whose dividends reach this divide integers (exact below 2^22;
  // tests run the integer path everywhere with SWITCHYARD_VK_EXACT_DIV=1).
  uint64_t reciprocal_limit = uint64_t(1) << 22;
  // The gemm and conv kernels' subgroup build (A's loads shared across a
  // subgroup) runs: a tile's loads per multiply-add are fewer.
  bool shared_a_loads = false;
  uint64_t max_range = 0;      // maxStorageBufferRange
  uint64_t storage_align = 4;  // minStorageBufferOffsetAlignment
  // Loop iterations one invocation may run, all its loops together (0: no
  // limit). Mesa's llvmpipe (lavapipe) ends every loop of an invocation
  // after 65535 iterations in all, silently: a longer launch computes a
  // wrong result.
  uint64_t loop_budget = 0;
  // Bytes of scratch a Program's split reductions share (their partials).
  uint64_t scratch_bytes = 4ull << 20;
  std::string device;  // for messages
};

constexpr uint64_t kNoScratch = UINT64_MAX;

// One dispatch: a Program's instruction, or a part of one: a GEMM split
// along K to stay within the device's loop budget, or a pass of a split
// reduction (extra_flags: the part's role, kGemmAccumulate, kPartials,
// kFinish).
struct Launch {
  const Instr* ins = nullptr;  // the Program's, or one of plan_launches' parts
  uint32_t extra_flags = 0;
  uint32_t instr = 0;  // the Program instruction it is (a part of)
  uint32_t aux = 0;    // a split reduction's parts (the first pass's workgroups, or len's splits)
  // The passes' region of the scratch buffer (bytes from its start), bound
  // at binding kScratchArg; kNoScratch: none.
  uint64_t scratch = kNoScratch, scratch_bytes = 0;
  int64_t part = -1;  // while planning: the index of its part in `parts` (-1: the Program's)
  // A multi-tensor launch (kMultiTensor): its tensors [first, first + count)
  // of the instruction's (plan_multi).
  uint32_t first = 0, count = 0;
};
// The dispatches of a Program, into `out`, pointing at the Program's
// instructions and, for split launches, at `parts` (both reused: nothing is
// copied or allocated per step once they have grown). A launch whose
// arguments pass maxStorageBufferRange is first split into parts that fit
// (split_by_range, split_gemm below), each planned as follows. A GEMM whose
// K loop would run past the loop budget becomes parts over ranges of K: the
// first adds the bias, the later ones add to C, the last applies the
// activation.
// A cross-entropy loss over more rows than one workgroup takes, and a
// column sum whose outputs are too few to fill the device (or whose columns
// are longer than the loop budget), become two passes through the scratch
// (shaders/cross_entropy.comp, reduce_sum.comp); each split reduction of a
// Program gets its own region of it while it lasts. Any other launch whose
// loops would run past the budget is an error that names the kernel and the
// sizes (never a silently truncated result).
void plan_launches(const LaunchConfig& c, const Program& prog, std::vector<Launch>& out,
                   std::vector<Instr>& parts);

// ---- multi-tensor kernels (vk_multi.cpp) ----------------------------------
// A multi-tensor launch (adam_multi, sgd_multi) binds windows of the memory blocks its
// tensors live in (bindings 0-4, each within maxStorageBufferRange) and
// finds each tensor through a table that follows its launch-table entry:
// one MultiEntry per tensor (shaders/adam_multi.comp reads it as two uvec4,
// u_multi). Its OpParams carry the tensor count in off[0] and the update
// pass's pieces in aux.
constexpr uint32_t kMaxMultiTensors = 32;  // tensors per launch (the shader's SY_MULTI_TABLE)
constexpr uint32_t kMultiWindows = kArgBindings;
struct MultiEntry {
  uint32_t off[4];    // the written arguments (adam: p, m, v, step; sgd: p, buf), elements
                      // from their window's start
  uint32_t off_g, n;  // g's offset; the tensor's elements
  uint32_t windows;   // 3 bits per argument: off[0..3]'s, then g's; kMultiCounts
  uint32_t first;     // its first piece (of 4 * wg elements)
};
// MultiEntry::windows: this entry increments its tensor's step count (a
// tensor cut into chunks has one entry per chunk; the first counts).
constexpr uint32_t kMultiCounts = 1u << 15;
// Multi-tensor launch flag: every argument is in window 0 (binding 0), so
// the shader reads no window field (shaders/multi.glsl's SY_ONE_WINDOW): a
// CPU driver runs each switch over windows as five masked loads.
constexpr uint32_t kOneWindow = 8192;
// With kOneWindow: every tensor argument starts on a vec4 (16 bytes) from
// the window's start, so each invocation updates 4 consecutive elements as
// one vec4 (SY_MULTI_VEC4).
constexpr uint32_t kMultiVec4 = 16384;
static_assert(sizeof(MultiEntry) == 32);
// Bytes of a multi-tensor launch's table entry with its tensors.
constexpr uint64_t kMultiTableBytes = sizeof(OpParams) + kMaxMultiTensors * sizeof(MultiEntry);
// Replaces each multi-tensor launch in `launches` (one per instruction, as
// plan_launches leaves them) by its groups: tensors in order (a tensor past
// one binding cut into chunks that fit), at most kMaxMultiTensors whose
// arguments fit kMultiWindows windows, each an update launch; then one
// launch per group (kFinish) that increments their step counts. A launch's
// `first` is its first tensor, `aux` that tensor's first chunk, `count` its
// entries. `tmp` is reused storage.
void plan_multi(const LaunchConfig& c, std::span<const Block> blocks, const Program& prog,
                std::span<const Binding> bind, std::vector<Launch>& launches,
                std::vector<Launch>& tmp);
// A multi-tensor launch's table entry, its table (`table`, count entries),
// its windows' descriptors and their ranges (at most kMultiWindows).
OpParams multi_params(const LaunchConfig& c, std::span<const Block> blocks, const Program& prog,
                      const Launch& l, std::span<const Binding> bind, MultiEntry* table,
                      VkDescriptorBufferInfo* desc, Range* ranges, int& nranges);

// ---- tensors past maxStorageBufferRange (vk_ranges.cpp) -------------------
// Bytes an argument may span in one binding: maxStorageBufferRange, less
// what launch_params may add (its descriptor starts up to an alignment below
// the argument and ends rounded up to 16 bytes); 0: no limit.
uint64_t binding_room(const LaunchConfig& c);
// Launches per instruction a split may make at most (more is a DeviceLimit).
constexpr int64_t kMaxRangeParts = 4096;
// Appends to `parts` the parts of `ins` whose arguments each fit one
// binding, returning how many (0: it fits whole). Elementwise kernels split
// into runs of elements (binary along its outermost dimension that fits),
// row kernels (softmax, cross-entropy and their backwards, argmax) into
// blocks of rows, expand and reduce_sum (outer > 1) along their outer index,
// or each outer index alone along len when one index's slice passes it
// (expand here; reduce_sum in the planner, as it splits a reduce_sum with
// outer == 1).
// Other kernels never split: launch_params refuses their arguments.
int64_t split_by_range(const LaunchConfig& c, const Instr& ins, std::vector<Instr>& parts);
// Appends a GEMM's launches when it splits (returns 0 when it runs whole):
// into blocks of (batch, M, N) whose operands each fit one binding (a block
// narrower than C writes rows aux apart), each block into parts of K of at
// most k_part (> 0; gemm_k_part: the loop budget) that add to C after the
// first (kGemmAccumulate): the first adds the bias, the last applies the
// activation.
// `flags`: the GEMM's variant (gemm_flags), on every launch.
size_t split_gemm(const LaunchConfig& c, const Instr& ins, uint32_t at, int64_t k_part,
                  uint32_t flags, std::vector<Launch>& out, std::vector<Instr>& parts);
// Whether every operand of the GEMM fits one binding (split_gemm makes no
// blocks).
bool gemm_fits_bindings(const LaunchConfig& c, const GemmParams& g, bool bias);
// The K of each part of a GEMM split for the loop budget (0: never split).
int64_t gemm_k_part(const LaunchConfig& c);

// ---- launch geometry, shared by the translation and the planner ----------
constexpr uint32_t kTile = 32;  // transpose.comp's tile side
inline uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? (a + b - 1) / b : a; }
inline uint64_t nonneg(int64_t v) { return v > 0 ? uint64_t(v) : 0; }
// Row kernels: rows of `cols` are a workgroup's each (kRowGroups), or an
// invocation's; the workgroups of either.
bool long_rows(const LaunchConfig& c, int64_t cols);
uint32_t rowwise_groups(const LaunchConfig& c, int64_t rows, int64_t cols);
// reduce_sum's row mode: inner == 1, rows a workgroup's.
bool row_sums(const LaunchConfig& c, const ReduceSumParams& r);
// binary's inputs laid out exactly like its (contiguous) output along every
// dimension longer than 1: one flat run of elements.
bool binary_flat(const BinaryParams& b);
// transpose.comp's tiled path: 4- and 8-byte elements, both sides a tile wide.
bool transpose_tiled(const LaunchConfig& c, const TransposeParams& t);
// The convolutions' implicit GEMMs (shaders/conv_gemm.glsl): they run on
// the gemm tiles (and its subgroup build), over an M x N product per
// group and split, K deep.
bool conv_kernel(Kernel k);
struct ConvGemm {
  uint64_t m, n, k, z;  // m: channels, n: pixels (or taps); k: the deepest product's
};
ConvGemm conv_gemm(const Instr& ins);
// The tile set a convolution launch with these flags runs on.
const std::array<uint32_t, 5>& conv_tiles(const LaunchConfig& c, uint32_t flags);
// The workgroups of cross_entropy's first pass (two passes when above 1).
uint32_t cross_entropy_groups(const LaunchConfig& c, const CrossEntropyParams& q);

// The kernel's mode, as SPEC_OP documents it (shaders/common.glsl).
int32_t spec_op(const Instr& ins);
// A pipeline: a kernel's build (plain or subgroup) specialized for a mode and flags.
uint64_t pipeline_key(Kernel k, bool sg, int32_t spec_op, uint32_t flags);
// The launch's typed params in the table's 32-bit slots of `o` (vk_params.h).
void pack_params(const LaunchConfig& c, const KernelParams& p, OpParams& o);
// The table entry of one launch (32-bit params, offsets from each
// descriptor's start, flags), its arguments' descriptors (kArgBindings;
// unused bindings alias argument 0) and the ranges it touches (at most
// kArgBindings + 2). `scratch`: the scratch buffer's allocation, for a
// launch that has a region of it. Throws for parameters or ranges the
// device cannot take.
OpParams launch_params(const LaunchConfig& c, std::span<const Block> blocks, const Launch& l,
                       std::span<const Binding> bind, const Alloc* scratch,
                       VkDescriptorBufferInfo* desc, Range* ranges, int& nranges);
// Grid size of one launch (see each shader's header for its geometry);
// `aux` is the launch's (Launch::aux).
void launch_grid(const LaunchConfig& c, const Instr& ins, uint32_t flags, uint32_t aux,
                 uint32_t g[3]);

}  // namespace switchyard::vk_impl
