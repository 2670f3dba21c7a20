// SPDX-License-Identifier: MIT
// Memory decisions and simulated devices (see vk_memory_policy.h).
#include "vk_memory_policy.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "switchyard/error.h"
#include "units.h"
#include "vk_instance.h"

namespace switchyard::vk_impl {

using detail::cat;

namespace {

constexpr VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                CACHED = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
// Types no buffer of ours belongs in: protected, lazily allocated, and AMD's
// device-coherent and uncached types (slower, for other purposes).
constexpr VkMemoryPropertyFlags kShunned =
    VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT | 0x40u | 0x80u;

bool has(VkMemoryPropertyFlags f, VkMemoryPropertyFlags bits) { return (f & bits) == bits; }

std::string flag_names(VkMemoryPropertyFlags f) {
  std::string s;
  auto add = [&](VkMemoryPropertyFlags b, const char* n) {
    if (f & b) s += cat(s.empty() ? "" : " ", n);
  };
  add(DL, "device-local");
  add(HV, "host-visible");
  add(HC, "coherent");
  add(CACHED, "cached");
  if ((f & HV) && !(f & HC)) s += " non-coherent";
  return s.empty() ? "plain" : s;
}

// Whether device memory is system memory: a CPU driver, an integrated GPU,
// or a device (not a discrete GPU) whose every heap is device-local and
// mappable.
bool unified(const Physical& p) {
  auto t = p.props.deviceType;
  if (t == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) return false;
  if (t == VK_PHYSICAL_DEVICE_TYPE_CPU || t == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU) return true;
  for (uint32_t h = 0; h < p.mem.memoryHeapCount; ++h)
    if (!(p.mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) return false;
  for (uint32_t t2 = 0; t2 < p.mem.memoryTypeCount; ++t2)
    if (has(p.mem.memoryTypes[t2].propertyFlags, DL | HV)) return true;
  return false;
}

}  // namespace

int pick_memory(const Physical& p, bool zero_copy, MemRole role, uint32_t allowed, int avoid_heap) {
  const VkPhysicalDeviceMemoryProperties& m = p.mem;
  int best = -1, best_score = -1;
  for (uint32_t t = 0; t < m.memoryTypeCount; ++t) {
    if (!(allowed & (1u << t))) continue;
    const VkMemoryPropertyFlags f = m.memoryTypes[t].propertyFlags;
    const uint32_t heap = m.memoryTypes[t].heapIndex;
    if ((f & kShunned) || m.memoryHeaps[heap].size == 0) continue;
    const int dl = (f & DL) ? 1 : 0, hv = (f & HV) ? 1 : 0, hc = (f & HC) ? 1 : 0,
              cached = (f & CACHED) ? 1 : 0;
    // Host memory the host reads: system memory on a discrete GPU (BAR
    // memory is an uncached read across PCIe), cached, coherent.
    const int host_side = zero_copy || !dl;
    int score = -1;
    switch (role) {
      case MemRole::tensor:
        if (zero_copy)
          score = hv ? 8 * dl + 4 * cached + 2 * hc : -1;
        else  // device-local; leave BAR memory (host-visible) to small data
          score = 8 * dl + 4 * !hv;
        break;
      case MemRole::tensor_fallback:
        // Only where device memory is system memory anyway (an APU's
        // carve-out, then the rest): a discrete GPU spilling tensors to
        // system memory would run on at a fraction of its speed, silently;
        // it reports out-of-memory instead, as CUDA does.
        if (int(heap) == avoid_heap || !zero_copy) break;
        score = hv ? 4 * cached + 2 * hc + dl : -1;
        break;
      case MemRole::staging:
        score = hv ? 8 * host_side + 4 * cached + 2 * hc : -1;
        break;
      case MemRole::status:
        // Read by the host once per completed step, 4 bytes, and set by
        // shader atomics: in BAR memory on a discrete GPU (device atomics in
        // system memory across PCIe need platform support), cached where
        // device memory is system memory.
        score = hv ? (zero_copy ? 4 * cached + 2 * hc : 8 * dl + 2 * hc) : -1;
        break;
      case MemRole::table:
        score = hv ? 8 * dl + 2 * hc : -1;
        break;
      case MemRole::pinned:
        score = hv && hc ? 8 * host_side + 4 * cached : -1;
        break;
    }
    if (score > best_score) best = int(t), best_score = score;
  }
  return best;
}

MemoryPolicy choose_memory(const Physical& p, bool force_staging) {
  MemoryPolicy mp;
  const uint32_t all = p.mem.memoryTypeCount >= 32 ? ~0u : (1u << p.mem.memoryTypeCount) - 1;
  // Zero-copy needs the mapped type's heap to be the device's memory, not a
  // small window beside a larger device-local heap.
  uint64_t largest = 0;
  for (uint32_t h = 0; h < p.mem.memoryHeapCount; ++h)
    if (p.mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      largest = std::max<uint64_t>(largest, p.mem.memoryHeaps[h].size);
  const int mapped = pick_memory(p, true, MemRole::tensor, all);
  mp.zero_copy = !force_staging && unified(p) && mapped >= 0 &&
                 p.mem.memoryHeaps[p.mem.memoryTypes[mapped].heapIndex].size * 2 >= largest;
  mp.tensor = pick_memory(p, mp.zero_copy, MemRole::tensor, all);
  const int heap = mp.tensor >= 0 ? int(p.mem.memoryTypes[mp.tensor].heapIndex) : -1;
  mp.tensor_fallback = pick_memory(p, mp.zero_copy, MemRole::tensor_fallback, all, heap);
  mp.staging = pick_memory(p, mp.zero_copy, MemRole::staging, all);
  mp.table = pick_memory(p, mp.zero_copy, MemRole::table, all);
  mp.status = pick_memory(p, mp.zero_copy, MemRole::status, all);
  mp.pinned = pick_memory(p, mp.zero_copy, MemRole::pinned, all);
  return mp;
}

std::string MemoryPolicy::describe(const Physical& p) const {
  auto type = [&](int t) {
    if (t < 0) return std::string("none");
    const VkMemoryType& mt = p.mem.memoryTypes[t];
    return cat("type ", t, " (", flag_names(mt.propertyFlags), ", heap ", mt.heapIndex, ")");
  };
  std::string s = zero_copy
                      ? cat("zero-copy: tensors mapped in ", type(tensor))
                      : cat("staging: tensors in ", type(tensor), ", ring in ", type(staging));
  if (tensor_fallback >= 0) s += cat("; past the budget, ", type(tensor_fallback));
  if (tensor >= 0) {
    uint32_t h = p.mem.memoryTypes[tensor].heapIndex;
    uint64_t budget[VK_MAX_MEMORY_HEAPS];
    uint64_t none[VK_MAX_MEMORY_HEAPS] = {};
    query_budget(p, none, budget);
    s += cat("; budget ", mib(budget[h]), " of heap ", h,
             p.budget_ext ? " (VK_EXT_memory_budget)" : " (its size: no VK_EXT_memory_budget)");
  }
  if (!p.simulated.empty()) s += cat("; simulated: ", p.simulated);
  return s;
}

void query_budget(const Physical& p, const uint64_t* usage_ours, uint64_t* out) {
  const uint32_t n = p.mem.memoryHeapCount;
  for (uint32_t h = 0; h < n; ++h) out[h] = p.mem.memoryHeaps[h].size;
  if (!p.simulated.empty()) {
    for (uint32_t h = 0; h < n; ++h)
      if (p.sim_budget[h]) out[h] = p.sim_budget[h];
    return;
  }
  if (!p.budget_ext || !vk.vkGetPhysicalDeviceMemoryProperties2) return;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT b{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 m2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, &b};
  vk.vkGetPhysicalDeviceMemoryProperties2(p.pd, &m2);
  for (uint32_t h = 0; h < n; ++h) {
    if (b.heapBudget[h] == 0) continue;  // the driver said nothing
    // heapUsage counts every user in this process; ours come back in.
    uint64_t others = b.heapUsage[h] > usage_ours[h] ? b.heapUsage[h] - usage_ours[h] : 0;
    out[h] = std::min<uint64_t>(out[h], b.heapBudget[h] > others ? b.heapBudget[h] - others : 0);
  }
}

// ---- simulated devices -----------------------------------------------------------

namespace {

struct Profile {
  const char* name;
  const char* what;
  VkPhysicalDeviceType type;
  uint64_t atom;
  bool budget_ext;
  std::vector<std::pair<uint64_t, bool>> heaps;                   // size, device-local
  std::vector<uint64_t> budgets;                                  // 0: the size
  std::vector<std::pair<VkMemoryPropertyFlags, uint32_t>> types;  // flags, heap
};

constexpr uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

const std::vector<Profile>& profiles() {
  static const std::vector<Profile> all = {
      {"discrete",
       "a discrete GPU without resizable BAR (8 GiB of VRAM, a 256 MiB BAR window)",
       VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU,
       64,
       true,
       {{8 * GiB, true}, {16 * GiB, false}, {256 * MiB, true}},
       {7 * GiB, 0, 0},
       {{DL, 0}, {HV | HC, 1}, {HV | HC | CACHED, 1}, {DL | HV | HC, 2}}},
      {"discrete-rebar",
       "a discrete GPU with resizable BAR (all 16 GiB of VRAM host-visible)",
       VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU,
       64,
       true,
       {{16 * GiB, true}, {16 * GiB, false}},
       {0, 0},
       {{DL, 0}, {HV | HC, 1}, {DL | HV | HC, 0}, {HV | HC | CACHED, 1}}},
      {"apu",
       "an APU: a 256 MiB device-local carve-out beside 12 GiB of system memory",
       VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
       64,
       true,
       {{256 * MiB, true}, {12 * GiB, false}},
       {0, 0},
       {{DL, 0}, {HV | HC, 1}, {DL | HV | HC, 0}, {HV | HC | CACHED, 1}}},
      {"mobile",
       "a mobile GPU whose cached host memory is non-coherent (atoms of 256 bytes)",
       VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
       256,
       false,
       {{4 * GiB, true}},
       {0},
       {{DL, 0}, {DL | HV | HC, 0}, {DL | HV | CACHED, 0}}},
  };
  return all;
}

}  // namespace

std::vector<std::string> simulation_profiles() {
  std::vector<std::string> r;
  for (const Profile& f : profiles()) r.push_back(f.name);
  return r;
}

void simulate(Physical& p, const std::string& name) {
  const Profile* f = nullptr;
  std::string known;
  for (const Profile& x : profiles()) {
    if (name == x.name) f = &x;
    known += cat(known.empty() ? "" : ", ", x.name);
  }
  SY_CHECK(f, "SWITCHYARD_VK_SIMULATE", "expected one of ", known, ", found '", name, "'");
  // Every simulated type is backed by one of the driver's: a mapped,
  // coherent one for a host-visible type (non-coherence is emulated), any
  // for the rest.
  int mapped = -1, local = -1, any = -1;
  for (uint32_t t = 0; t < p.mem.memoryTypeCount; ++t) {
    VkMemoryPropertyFlags fl = p.mem.memoryTypes[t].propertyFlags;
    if (fl & kShunned) continue;
    if (any < 0) any = int(t);
    if (local < 0 && (fl & DL)) local = int(t);
    if (mapped < 0 && has(fl, HV | HC)) mapped = int(t);
  }
  if (local < 0) local = any;
  SY_CHECK(mapped >= 0, "SWITCHYARD_VK_SIMULATE", "expected a driver with host-visible coherent ",
           "memory to back the simulated ", name, ", found none on ", p.props.deviceName);
  VkPhysicalDeviceMemoryProperties m{};
  m.memoryHeapCount = uint32_t(f->heaps.size());
  for (size_t h = 0; h < f->heaps.size(); ++h) {
    m.memoryHeaps[h].size = f->heaps[h].first;
    m.memoryHeaps[h].flags = f->heaps[h].second ? VK_MEMORY_HEAP_DEVICE_LOCAL_BIT : 0;
    p.sim_budget[h] = f->budgets[h];
  }
  m.memoryTypeCount = uint32_t(f->types.size());
  p.emulate_noncoherent = 0;
  for (size_t t = 0; t < f->types.size(); ++t) {
    m.memoryTypes[t] = {f->types[t].first, f->types[t].second};
    const bool host = f->types[t].first & HV;
    p.real_type[t] = uint32_t(host ? mapped : local);
    if (host && !(f->types[t].first & HC)) p.emulate_noncoherent |= 1u << t;
  }
  p.mem = m;
  p.props.deviceType = f->type;
  // Never finer than the driver's own atoms (the real flushes use them).
  p.props.limits.nonCoherentAtomSize =
      std::max<VkDeviceSize>(f->atom, p.props.limits.nonCoherentAtomSize);
  p.budget_ext = f->budget_ext;
  p.simulated = cat(f->name, " (", f->what, ")");
}

void apply_simulation(Physical& p) {
  const char* e = std::getenv("SWITCHYARD_VK_SIMULATE");
  if (e && *e) simulate(p, e);
}

}  // namespace switchyard::vk_impl
