// SPDX-License-Identifier: MIT
// A custom kernel's SPIR-V checked against its spec and the device before a
// pipeline is made of it (see vk_custom.h): bindings and their roles, the
// parameter block's extent, capabilities, shared memory.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "switchyard/error.h"
#include "vk_custom.h"

namespace switchyard::vk_impl {
namespace {

// SPIR-V numbers this check reads (the SPIR-V specification, section 3; the
// spirv-headers package is not needed to build the backend).
enum Op : uint32_t {
  OpCapability = 17,
  OpTypeBool = 20,
  OpTypeInt = 21,
  OpTypeFloat = 22,
  OpTypeVector = 23,
  OpTypeMatrix = 24,
  OpTypeArray = 28,
  OpTypeRuntimeArray = 29,
  OpTypeStruct = 30,
  OpTypePointer = 32,
  OpConstant = 43,
  OpSpecConstant = 50,
  OpVariable = 59,
  OpDecorate = 71,
  OpMemberDecorate = 72,
};
enum Decoration : uint32_t {
  DecBufferBlock = 3,
  DecArrayStride = 6,
  DecMatrixStride = 7,
  DecRowMajor = 4,
  DecNonWritable = 24,
  DecBinding = 33,
  DecDescriptorSet = 34,
  DecOffset = 35,
};
enum StorageClass : uint32_t {
  UniformConstant = 0,
  Uniform = 2,
  Workgroup = 4,
  PushConstant = 9,
  StorageBuffer = 12,
};

// The capabilities a custom kernel may declare, and what each needs.
struct Cap {
  uint32_t id;
  const char* name;
  enum Need { always, float64, int64, int16, subgroup } need;
  uint32_t subgroup_bit;  // VkSubgroupFeatureFlagBits
};
constexpr Cap kCaps[] = {
    {0, "Matrix", Cap::always, 0},
    {1, "Shader", Cap::always, 0},
    {10, "Float64", Cap::float64, 0},
    {11, "Int64", Cap::int64, 0},
    {22, "Int16", Cap::int16, 0},
    {61, "GroupNonUniform", Cap::subgroup, 0x1},
    {62, "GroupNonUniformVote", Cap::subgroup, 0x2},
    {63, "GroupNonUniformArithmetic", Cap::subgroup, 0x4},
    {64, "GroupNonUniformBallot", Cap::subgroup, 0x8},
    {65, "GroupNonUniformShuffle", Cap::subgroup, 0x10},
    {66, "GroupNonUniformShuffleRelative", Cap::subgroup, 0x20},
    {67, "GroupNonUniformClustered", Cap::subgroup, 0x40},
    {68, "GroupNonUniformQuad", Cap::subgroup, 0x80},
};
// Names for the capabilities most often met that are refused.
const char* refused_name(uint32_t id) {
  switch (id) {
    case 9:
      return "Float16";
    case 12:
      return "Int64Atomics";
    case 39:
      return "Int8";
    case 4433:
      return "StorageBuffer16BitAccess";
    case 4434:
      return "UniformAndStorageBuffer16BitAccess";
    case 4448:
      return "StorageBuffer8BitAccess";
    case 4449:
      return "UniformAndStorageBuffer8BitAccess";
    case 5008:
      return "Int64ImageEXT";
    case 6033:
      return "AtomicFloat32AddEXT";
    default:
      return nullptr;
  }
}

struct Type {
  uint32_t op = 0;
  std::vector<uint32_t> w;  // the operands after the result id
};

struct Module {
  std::unordered_map<uint32_t, Type> types;
  std::unordered_map<uint32_t, uint64_t> constants;  // integer constants (low 64 bits)
  std::unordered_map<uint32_t, std::map<uint32_t, uint32_t>> decor;  // id -> decoration -> value
  std::unordered_map<uint32_t, std::map<uint32_t, std::map<uint32_t, uint32_t>>> member_decor;
  std::vector<std::pair<uint32_t, uint32_t>> variables;  // (pointer type, id)
  std::vector<uint32_t> caps;
};

Module parse(const std::vector<uint32_t>& code, const char* what) {
  SY_CHECK(code.size() >= 5, what, "expected a SPIR-V module, found ", code.size(), " words");
  Module m;
  for (size_t at = 5; at < code.size();) {
    const uint32_t n = code[at] >> 16, op = code[at] & 0xffff;
    SY_CHECK(n >= 1 && at + n <= code.size(), what,
             "expected well-formed SPIR-V, found an instruction of ", n, " words at word ", at);
    const uint32_t* w = &code[at + 1];
    switch (op) {
      case OpCapability:
        m.caps.push_back(w[0]);
        break;
      case OpTypeBool:
      case OpTypeInt:
      case OpTypeFloat:
      case OpTypeVector:
      case OpTypeMatrix:
      case OpTypeArray:
      case OpTypeRuntimeArray:
      case OpTypeStruct:
      case OpTypePointer:
        if (n >= 2) m.types[w[0]] = {op, std::vector<uint32_t>(w + 1, w + n - 1)};
        break;
      case OpConstant:
      case OpSpecConstant:
        if (n >= 4)
          m.constants[w[1]] = n >= 5 ? uint64_t(w[2]) | uint64_t(w[3]) << 32 : uint64_t(w[2]);
        break;
      case OpVariable:
        if (n >= 4) m.variables.push_back({w[0], w[1]});
        break;
      case OpDecorate:
        if (n >= 3) m.decor[w[0]][w[1]] = n >= 4 ? w[2] : 1;
        break;
      case OpMemberDecorate:
        if (n >= 4) m.member_decor[w[0]][w[1]][w[2]] = n >= 5 ? w[3] : 1;
        break;
      default:
        break;
    }
    at += n;
  }
  return m;
}

const uint32_t* decoration(const Module& m, uint32_t id, uint32_t d) {
  auto it = m.decor.find(id);
  if (it == m.decor.end()) return nullptr;
  auto jt = it->second.find(d);
  return jt == it->second.end() ? nullptr : &jt->second;
}

const uint32_t* member_decoration(const Module& m, uint32_t id, uint32_t member, uint32_t d) {
  auto it = m.member_decor.find(id);
  if (it == m.member_decor.end()) return nullptr;
  auto jt = it->second.find(member);
  if (jt == it->second.end()) return nullptr;
  auto kt = jt->second.find(d);
  return kt == jt->second.end() ? nullptr : &kt->second;
}

// Bytes a value of `type` occupies: with the module's explicit layout
// (Offset, ArrayStride, MatrixStride) where it has one, else packed
// naturally (shared memory). A runtime array counts as empty.
uint64_t size_of(const Module& m, uint32_t type, int depth = 0) {
  auto it = m.types.find(type);
  if (it == m.types.end() || depth > 32) return 0;
  const Type& t = it->second;
  switch (t.op) {
    case OpTypeBool:
      return 4;
    case OpTypeInt:
    case OpTypeFloat:
      return t.w.empty() ? 4 : (t.w[0] + 7) / 8;
    case OpTypeVector:
      return t.w.size() < 2 ? 0 : t.w[1] * size_of(m, t.w[0], depth + 1);
    case OpTypeMatrix:  // packed; a member's MatrixStride is on its struct (below)
      return t.w.size() < 2 ? 0 : t.w[1] * size_of(m, t.w[0], depth + 1);
    case OpTypeArray: {
      if (t.w.size() < 2) return 0;
      auto c = m.constants.find(t.w[1]);
      const uint64_t len = c == m.constants.end() ? 0 : c->second;
      const uint32_t* stride = decoration(m, type, DecArrayStride);
      return len * (stride ? *stride : size_of(m, t.w[0], depth + 1));
    }
    case OpTypeRuntimeArray:
      return 0;
    case OpTypeStruct: {
      uint64_t end = 0, packed = 0;
      for (uint32_t k = 0; k < t.w.size(); ++k) {
        uint64_t s = size_of(m, t.w[k], depth + 1);
        auto mt = m.types.find(t.w[k]);
        const uint32_t* ms = member_decoration(m, type, k, DecMatrixStride);
        if (ms && mt != m.types.end() && mt->second.op == OpTypeMatrix &&
            mt->second.w.size() >= 2) {
          // The stride is per column, or per row of a row-major matrix.
          uint64_t lines = mt->second.w[1];
          if (member_decoration(m, type, k, DecRowMajor)) {
            auto ct = m.types.find(mt->second.w[0]);
            lines = ct != m.types.end() && ct->second.w.size() >= 2 ? ct->second.w[1] : 0;
          }
          s = lines * *ms;
        }
        const uint32_t* off = member_decoration(m, type, k, DecOffset);
        packed += s;
        end = std::max<uint64_t>(end, off ? *off + s : packed);
      }
      return end;
    }
    default:
      return 0;
  }
}

// A block whose every member is NonWritable (GLSL `readonly` on the block
// or on each member), or a variable decorated NonWritable itself.
bool read_only(const Module& m, uint32_t var, uint32_t block) {
  if (decoration(m, var, DecNonWritable)) return true;
  auto it = m.types.find(block);
  if (it == m.types.end() || it->second.op != OpTypeStruct || it->second.w.empty()) return false;
  for (uint32_t k = 0; k < it->second.w.size(); ++k)
    if (!member_decoration(m, block, k, DecNonWritable)) return false;
  return true;
}

}  // namespace

void check_custom_module(const KernelSpec& s, const std::vector<uint32_t>& code,
                         const CustomDeviceCaps& dev) {
  const std::string op_s = "custom kernel " + s.name;
  const char* op = op_s.c_str();
  const Module m = parse(code, op);

  for (uint32_t c : m.caps) {
    const Cap* cap = nullptr;
    for (const Cap& k : kCaps)
      if (k.id == c) cap = &k;
    if (!cap) {
      const char* name = refused_name(c);
      throw DeviceLimit(detail::cat(
          "[", op_s, "] expected SPIR-V capabilities Switchyard enables on ", dev.device,
          " (Shader, Float64, Int64, Int16 where the device has them, the subgroup operations it "
          "supports), found capability ",
          name ? name : "", name ? " (" : "", c, name ? ")" : ""));
    }
    const bool ok = cap->need == Cap::always || (cap->need == Cap::float64 && dev.float64) ||
                    (cap->need == Cap::int64 && dev.int64) ||
                    (cap->need == Cap::int16 && dev.int16) ||
                    (cap->need == Cap::subgroup && dev.subgroup_in_compute &&
                     (dev.subgroup_ops & cap->subgroup_bit) == cap->subgroup_bit);
    if (!ok)
      throw DeviceLimit(detail::cat(
          "[", op_s, "] expected operations ", dev.device,
          " supports, found the kernel needs SPIR-V capability ", cap->name, ", which it lacks",
          cap->need == Cap::subgroup ? " (its subgroup operations: see `switchyard devices`)"
                                     : ""));
  }

  const int nargs = int(s.outputs.size() + s.inputs.size());
  const int nout = int(s.outputs.size());
  uint64_t shared = 0;
  for (auto [ptr, var] : m.variables) {
    auto pt = m.types.find(ptr);
    if (pt == m.types.end() || pt->second.op != OpTypePointer || pt->second.w.size() < 2) continue;
    const uint32_t sc = pt->second.w[0], pointee = pt->second.w[1];
    if (sc == Workgroup) {
      shared += size_of(m, pointee);
      continue;
    }
    if (sc == PushConstant)
      throw Error(detail::cat("[", op_s,
                              "] expected parameters through SY_PARAMS (binding 5), found a "
                              "push-constant block (Switchyard's pipelines have none)"));
    if (sc != Uniform && sc != StorageBuffer && sc != UniformConstant) continue;
    const uint32_t* b = decoration(m, var, DecBinding);
    const uint32_t* set = decoration(m, var, DecDescriptorSet);
    const uint32_t binding = b ? *b : 0;
    SY_CHECK(!set || *set == 0, op, "expected every binding in descriptor set 0, found binding ",
             binding, " in set ", *set);
    SY_CHECK(sc != UniformConstant, op,
             "expected buffers only (storage buffers, SY_PARAMS), found ",
             "an image, sampler or other opaque resource at binding ", binding);
    const bool storage = sc == StorageBuffer || decoration(m, pointee, DecBufferBlock);
    // (Several blocks may alias one binding: `float x[]` and `vec4 x4[]`.)
    if (binding == 5) {
      SY_CHECK(!storage, op,
               "expected binding 5 to be the parameter block (SY_PARAMS, a uniform block), found a "
               "storage buffer");
      // The user's parameters start after Switchyard's 32 bytes (SY_PARAMS).
      const uint64_t end = size_of(m, pointee);
      const uint64_t used = end > 32 ? end - 32 : 0;
      SY_CHECK(used <= s.params_bytes, op, "expected parameters that fit the ", s.params_bytes,
               " bytes of KernelSpec::params_bytes, found the GLSL block spans ", used,
               " bytes after its std140 layout (vec3 and structs align to 16 bytes, array elements "
               "take 16 each): match the C++ struct to it");
      continue;
    }
    SY_CHECK(binding != 6, op, "expected bindings 0 to ", nargs - 1,
             " (the arguments) and 5 (SY_PARAMS), found "
             "binding 6, which is Switchyard's");
    SY_CHECK(int64_t(binding) < nargs, op, "expected bindings 0 to ", nargs - 1, " (", nout,
             " outputs, then ", s.inputs.size(), " inputs) and 5 (SY_PARAMS), found binding ",
             binding);
    SY_CHECK(storage, op, "expected binding ", binding,
             " to be a storage buffer (SY_OUTPUT, SY_INPUT or `buffer`), found a uniform block");
    if (int(binding) >= nout)
      SY_CHECK(read_only(m, var, pointee), op, "expected binding ", binding, " (input '",
               s.inputs[size_t(binding) - size_t(nout)].name,
               "') to be read-only (SY_INPUT, or `readonly`), found it writable: inputs are never "
               "written (declare an output instead)");
  }
  if (shared > dev.max_shared_bytes)
    throw DeviceLimit(detail::cat("[", op_s, "] expected at most ", dev.max_shared_bytes,
                                  " bytes of shared memory (maxComputeSharedMemorySize of ",
                                  dev.device, "), found ", shared));
}

}  // namespace switchyard::vk_impl
