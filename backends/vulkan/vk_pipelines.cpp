// SPDX-License-Identifier: MIT
// The Vulkan pipelines and their on-disk cache (see vk_pipelines.h).
#include "vk_pipelines.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>
#include <thread>

#include "switchyard/backend/custom.h"
#include "switchyard/backend/files.h"
#include "switchyard/settings.h"
#include "vk_gemm.h"
#include "vk_spirv.h"

namespace switchyard::vk_impl {

std::string Pipelines::cache_path() const {
  if (const char* p = std::getenv("SWITCHYARD_VK_PIPELINE_CACHE"); p && *p) return p;
  const char* home = std::getenv("XDG_CACHE_HOME");
  std::string base =
      home && *home ? home
                    : (std::getenv("HOME") ? std::string(std::getenv("HOME")) + "/.cache" : "");
  if (base.empty()) return "";
  char id[64];
  std::snprintf(id, sizeof id, "%08x_%08x_%08x", c_.p.props.vendorID, c_.p.props.deviceID,
                c_.p.props.driverVersion);
  return base + "/switchyard/vk_pipelines_" + id + ".bin";
}

namespace {

// The file: our own header, then the driver's cache data. The header's
// length and hash let a torn, truncated or corrupt file be dropped before
// the driver sees it (drivers check only their own small header).
constexpr char kCacheMagic[8] = {'S', 'Y', 'V', 'K', 'P', 'C', '0', '1'};
constexpr size_t kCacheHeader = 8 + 8 + 8;
constexpr size_t kMaxCacheBytes = size_t(256) << 20;

uint64_t fnv1a(const char* p, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(p[i])) * 1099511628211ull;
  return h;
}

// The driver's data inside a cache file, or "" when the file is not one of
// ours or does not check out.
std::string_view cache_payload(const std::string& file) {
  if (file.size() < kCacheHeader || std::memcmp(file.data(), kCacheMagic, 8) != 0) return {};
  uint64_t n = 0, h = 0;
  std::memcpy(&n, file.data() + 8, 8);
  std::memcpy(&h, file.data() + 16, 8);
  if (n != file.size() - kCacheHeader || fnv1a(file.data() + kCacheHeader, size_t(n)) != h)
    return {};
  return std::string_view(file).substr(kCacheHeader);
}

}  // namespace

std::string cache_header_mismatch(std::string_view payload, const VkPhysicalDeviceProperties& p) {
  // VkPipelineCacheHeaderVersionOne: size, version, vendorID, deviceID (4
  // bytes each), pipelineCacheUUID (16).
  if (payload.size() < 32)
    return cat("expected a 32-byte driver header, found ", payload.size(), " bytes");
  uint32_t w[4];
  std::memcpy(w, payload.data(), 16);
  if (w[0] < 32 || w[0] > payload.size())
    return cat("expected a header size of 32 to ", payload.size(), ", found ", w[0]);
  if (w[1] != uint32_t(VK_PIPELINE_CACHE_HEADER_VERSION_ONE))
    return cat("expected header version 1, found ", w[1]);
  char have[32], want[32];
  std::snprintf(have, sizeof have, "%04x:%04x", w[2], w[3]);
  std::snprintf(want, sizeof want, "%04x:%04x", p.vendorID, p.deviceID);
  if (w[2] != p.vendorID || w[3] != p.deviceID)
    return cat("made for vendor:device ", have, ", this device is ", want);
  if (std::memcmp(payload.data() + 16, p.pipelineCacheUUID, VK_UUID_SIZE) != 0)
    return "made by another driver build (its pipelineCacheUUID differs)";
  return {};
}

// Never lets the cache stop the device: whatever is at the path (nothing, a
// directory, a FIFO, a link to /dev/zero, a huge, corrupt or foreign file)
// means an empty cache.
void Pipelines::load_cache() {
  std::string file;
  std::string_view data;
  if (std::string path = cache_path(); !path.empty() && disk_cache_enabled()) {
    disk_ = true;
    try {
      file = files::read_regular(path, kMaxCacheBytes, "vulkan pipeline cache").value_or("");
      data = cache_payload(file);
    } catch (const std::exception&) {
      data = {};
    }
    // Another device's or driver build's data never reaches this driver.
    if (!data.empty() && !cache_header_mismatch(data, c_.p.props).empty()) data = {};
    files::remove_stale_temporaries(path);
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = data.size();
  ci.pInitialData = data.empty() ? nullptr : data.data();
  if (vk.vkCreatePipelineCache(c_.dev, &ci, nullptr, &cache_) != VK_SUCCESS) {
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    if (vk.vkCreatePipelineCache(c_.dev, &ci, nullptr, &cache_) != VK_SUCCESS)
      cache_ = VK_NULL_HANDLE;  // pipelines are created without a cache
  }
}

// Written atomically (a full disk or a kill leaves the old file); a failure
// only costs the next run its shader compilation.
void Pipelines::save_cache() {
  if (!cache_ || !grew_ || !disk_ || !disk_cache_enabled()) return;
  std::string path = cache_path();
  if (path.empty()) return;
  size_t n = 0;
  if (vk.vkGetPipelineCacheData(c_.dev, cache_, &n, nullptr) != VK_SUCCESS || n == 0 ||
      n > kMaxCacheBytes - kCacheHeader)
    return;
  std::string out(kCacheHeader + n, '\0');
  if (vk.vkGetPipelineCacheData(c_.dev, cache_, &n, out.data() + kCacheHeader) != VK_SUCCESS)
    return;
  out.resize(kCacheHeader + n);
  uint64_t len = n, h = fnv1a(out.data() + kCacheHeader, n);
  std::memcpy(out.data(), kCacheMagic, 8);
  std::memcpy(out.data() + 8, &len, 8);
  std::memcpy(out.data() + 16, &h, 8);
  try {
    std::error_code ec;
    // Only a regular file or nothing is replaced (through a link, the file
    // it names: write_atomic follows links): never a FIFO, a device or a
    // directory someone put there.
    auto kind = std::filesystem::status(path, ec).type();
    if (kind != std::filesystem::file_type::not_found &&
        kind != std::filesystem::file_type::regular)
      return;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    files::remove_stale_temporaries(path);
    files::write_atomic(path, out, "vulkan pipeline cache");
    grew_ = false;
  } catch (const std::exception&) {
    // Not fatal: the device worked; the next run compiles its shaders again.
  }
}

uint32_t Pipelines::index(const Instr& ins, uint32_t flags) {
  Kernel k = ins.kernel;
  bool sg = k == Kernel::gemm || conv_kernel(k) ? c_.gemm_sg
                                                : c_.use_subgroups && kernel_has(k, kSubgroup);
  // A custom kernel's pipeline is its own module's: keyed by its id.
  uint64_t key = k == Kernel::custom
                     ? uint64_t(k) | uint64_t(params<Kernel::custom>(ins.params).id) << 32
                     : pipeline_key(k, sg, spec_op(ins), flags);
  auto [it, fresh] = index_.try_emplace(key, uint32_t(pipelines_.size()));
  if (fresh) pipelines_.push_back({key, VK_NULL_HANDLE});
  return it->second;
}

namespace {
// A pipeline key's kernel for messages: "custom kernel <name>" for a custom one.
std::string key_name(uint64_t key) {
  const Kernel k = Kernel(key & 0xff);
  return k == Kernel::custom ? cat("custom kernel ", custom_impl::spec(int64_t(key >> 32)).name)
                             : std::string(kernel_name(k));
}
}  // namespace

VkPipeline Pipelines::get(uint32_t idx) const {
  VkPipeline pl = pipelines_[idx].second;
  SY_CHECK(pl, key_name(pipelines_[idx].first).c_str(),
           "expected its pipeline made before recording (Pipelines::warm), found none");
  return pl;
}

void Pipelines::warm(std::span<const uint32_t> idx, size_t stride) {
  std::vector<uint32_t> missing;
  for (size_t j = 0; j < idx.size(); j += stride)
    if (!pipelines_[idx[j]].second &&
        std::find(missing.begin(), missing.end(), idx[j]) == missing.end())
      missing.push_back(idx[j]);
  if (missing.empty()) return;
  // Several pipelines: compiled on several threads (vkCreateComputePipelines
  // may be called concurrently; the cache is internally synchronized).
  size_t threads =
      std::min<size_t>({missing.size(), 8, std::max(1u, std::thread::hardware_concurrency())});
  if (const char* t = std::getenv("SWITCHYARD_VK_PIPELINE_THREADS"); t && *t)
    threads = std::clamp<size_t>(size_t(std::atoi(t)), 1, threads);
  std::vector<VkPipeline> made(missing.size(), VK_NULL_HANDLE);
  std::vector<VkResult> results(missing.size(), VK_SUCCESS);
  std::vector<const char*> calls(missing.size(), "");
  std::vector<std::exception_ptr> errors(threads);
  auto work = [&](size_t t) {
    try {
      for (size_t j = t; j < missing.size(); j += threads)
        results[j] = create(pipelines_[missing[j]].first, made[j], calls[j]);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  std::vector<size_t> here = {0};  // this thread's shares, and those no thread could be started for
  for (size_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work, t);
    } catch (const std::system_error&) {
      here.push_back(t);
    }
  }
  for (size_t t : here) work(t);
  for (auto& th : pool) th.join();
  for (size_t j = 0; j < missing.size(); ++j)  // what was made is kept, even after a failure
    if (made[j]) pipelines_[missing[j]].second = made[j], grew_ = true;
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  for (size_t j = 0; j < missing.size(); ++j)  // on this thread: check() records a lost device
    c_.check(results[j], key_name(pipelines_[missing[j]].first).c_str(), calls[j]);
  // Saved after warm-up, not only at exit, so a killed run keeps what it
  // compiled; at most once a second (each save rewrites the whole cache):
  // the exit saves the rest.
  auto now = std::chrono::steady_clock::now();
  if (last_save_ == std::chrono::steady_clock::time_point{} ||
      now - last_save_ >= std::chrono::seconds(1)) {
    last_save_ = now;
    save_cache();
  }
}

VkResult Pipelines::create_custom(int64_t id, VkPipeline& pl, const char*& call) const {
  std::shared_ptr<const std::vector<uint32_t>> code;
  {
    std::lock_guard lock(c_.custom_mu);
    auto it = c_.custom_spirv.find(id);
    SY_CHECK(it != c_.custom_spirv.end(), "custom", "expected kernel ", id,
             " compiled for this device before its launch, found it was not (internal error)");
    code = it->second;
  }
  VkShaderModuleCreateInfo sci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sci.codeSize = code->size() * 4;
  sci.pCode = code->data();
  VkShaderModule mod;
  call = "vkCreateShaderModule";
  if (VkResult r = vk.vkCreateShaderModule(c_.dev, &sci, nullptr, &mod); r != VK_SUCCESS) return r;
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.layout = c_.pipe_layout;
  call = "vkCreateComputePipelines";
  VkResult r = vk.vkCreateComputePipelines(c_.dev, cache_, 1, &ci, nullptr, &pl);
  vk.vkDestroyShaderModule(c_.dev, mod, nullptr);
  if (r != VK_SUCCESS) pl = VK_NULL_HANDLE;
  c_.set_name(VK_OBJECT_TYPE_PIPELINE, pl,
              cat("pipeline of custom kernel ", custom_impl::spec(id).name));
  return r;
}

VkResult Pipelines::create(uint64_t key, VkPipeline& pl, const char*& call) const {
  pl = VK_NULL_HANDLE;
  Kernel k = Kernel(key & 0xff);
  if (k == Kernel::custom) return create_custom(int64_t(key >> 32), pl, call);
  bool sg = (key >> 8) & 1;
  std::string name = std::string(kernel_name(k)) + (sg ? "_sg" : "");
  const SpirvModule* m = nullptr;
  for (size_t j = 0; j < kSpirvModuleCount; ++j)
    if (name == kSpirvModules[j].name) m = &kSpirvModules[j];
  SY_CHECK(m, kernel_name(k), "expected an embedded shader '", name, "' in this build, found none");
  VkShaderModuleCreateInfo sci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sci.codeSize = m->words * 4;
  sci.pCode = m->code;
  VkShaderModule mod;
  call = "vkCreateShaderModule";
  if (VkResult r = vk.vkCreateShaderModule(c_.dev, &sci, nullptr, &mod); r != VK_SUCCESS) return r;
  // constant_id 0: workgroup size; 1-5: gemm tiles; 10: SPEC_OP; 11: SPEC_FLAGS.
  uint32_t spec[8] = {c_.lc.wg};
  uint32_t ids[8] = {0};
  uint32_t nspec = 1;
  if (k == Kernel::gemm || conv_kernel(k)) {
    const uint32_t fl = uint32_t(key >> 32);
    const auto& t = k == Kernel::gemm ? gemm_tiles(c_.lc, fl) : conv_tiles(c_.lc, fl);
    spec[0] = (t[0] / t[3]) * (t[1] / t[4]);
    for (uint32_t j = 0; j < 5; ++j) spec[nspec] = t[j], ids[nspec++] = j + 1;
  }
  uint32_t op16 = uint32_t((key >> 16) & 0xffff);
  spec[nspec] = op16 & 0x8000 ? op16 | 0xffff0000u : op16, ids[nspec++] = 10;  // sign-extended
  spec[nspec] = uint32_t(key >> 32), ids[nspec++] = 11;
  VkSpecializationMapEntry entries[8];
  for (uint32_t j = 0; j < nspec; ++j) entries[j] = {ids[j], j * 4, 4};
  VkSpecializationInfo si{nspec, entries, nspec * 4, spec};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &si;
  ci.layout = c_.pipe_layout;
  call = "vkCreateComputePipelines";
  VkResult r = vk.vkCreateComputePipelines(c_.dev, cache_, 1, &ci, nullptr, &pl);
  vk.vkDestroyShaderModule(c_.dev, mod, nullptr);
  if (r != VK_SUCCESS) pl = VK_NULL_HANDLE;
  char flags[16];
  std::snprintf(flags, sizeof flags, "0x%x", unsigned(key >> 32));
  c_.set_name(VK_OBJECT_TYPE_PIPELINE, pl,
              cat("pipeline ", name, " (op ", int16_t(op16), ", flags ", flags, ")"));
  return r;
}

void Pipelines::destroy() {
  for (auto& [key, p] : pipelines_)
    if (p) vk.vkDestroyPipeline(c_.dev, p, nullptr);
  if (cache_) vk.vkDestroyPipelineCache(c_.dev, cache_, nullptr);
  cache_ = VK_NULL_HANDLE;
  pipelines_.clear();
  index_.clear();
}

}  // namespace switchyard::vk_impl
