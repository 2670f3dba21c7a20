// SPDX-License-Identifier: MIT
// The Vulkan pipelines: one per kernel build (plain or subgroup), launch
// mode and flags (SPEC_OP, SPEC_FLAGS in shaders/common.glsl), all those a
// Program needs created before its recording starts (several threads at once
// where there are several), and a VkPipelineCache kept on disk, saved after
// each warm-up that made pipelines, so later runs skip shader compilation
// where the driver supports it.
#pragma once
#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vk_context.h"

namespace switchyard::vk_impl {

class Pipelines {
 public:
  explicit Pipelines(Context& c) : c_(c) {}

  // The on-disk cache: SWITCHYARD_VK_PIPELINE_CACHE, else
  // $XDG_CACHE_HOME (or ~/.cache)/switchyard/vk_pipelines_<ids>.bin, in an
  // envelope with a length and hash. Loaded at set-up (a missing, corrupt
  // or non-regular file, or one whose driver header names another vendor,
  // device or pipelineCacheUUID, is an empty cache), saved atomically (a
  // temporary renamed over it) when it grew.
  void load_cache();
  void save_cache();
  // Index of the pipeline for this launch; the pipeline itself is created
  // by warm().
  uint32_t index(const Instr& ins, uint32_t flags);
  // Creates the pipelines among `idx` not made yet (in parallel when there
  // are several, unless SWITCHYARD_VK_PIPELINE_THREADS=1), then saves the
  // cache if it grew. Called before a Program is recorded.
  void warm(std::span<const uint32_t> idx, size_t stride);
  // A pipeline warm() made (recording never compiles a shader).
  VkPipeline get(uint32_t idx) const;
  void destroy();

 private:
  std::string cache_path() const;
  // Thread-safe (the cache is internally synchronized): a failed call is
  // returned with its name, for the calling thread to report.
  VkResult create(uint64_t key, VkPipeline& pl, const char*& call) const;
  // A custom kernel's pipeline, from the SPIR-V prepare_custom compiled.
  VkResult create_custom(int64_t id, VkPipeline& pl, const char*& call) const;

  Context& c_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  bool grew_ = false;
  bool disk_ = false;  // the cache file was read at start: it may be written
  std::chrono::steady_clock::time_point last_save_{};  // saves after warm-up: at most 1 a second
  std::vector<std::pair<uint64_t, VkPipeline>> pipelines_;  // key, pipeline
  std::unordered_map<uint64_t, uint32_t> index_;
};

// Empty when `payload` (a VkPipelineCache's data) starts with a version-one
// header made by this vendor, device and pipelineCacheUUID; else why not.
// Drivers are meant to reject foreign data themselves, and some crash on it.
std::string cache_header_mismatch(std::string_view payload, const VkPhysicalDeviceProperties& p);

}  // namespace switchyard::vk_impl
