// SPDX-License-Identifier: MIT
// The Vulkan pipelines: one per kernel build (plain or subgroup), launch
// mode and flags (SPEC_OP, SPEC_FLAGS in shaders/common.glsl), created when
// first recorded, and a VkPipelineCache kept on disk so later runs skip
// shader compilation where the driver supports it.
#pragma once
#include <string>
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
  // envelope with a length and hash. Loaded at set-up (a missing, foreign,
  // corrupt or non-regular file is an empty cache), saved atomically at
  // teardown when it grew.
  void load_cache();
  void save_cache();
  // Index of the pipeline for this launch; the pipeline itself is created
  // by get() when first recorded.
  uint32_t index(const Instr& ins, uint32_t flags);
  VkPipeline get(uint32_t idx);
  void destroy();

 private:
  std::string cache_path() const;

  Context& c_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  bool grew_ = false;
  bool disk_ = false;  // the cache file was read at start: it may be written at exit
  std::vector<std::pair<uint64_t, VkPipeline>> pipelines_;  // key, pipeline
  std::unordered_map<uint64_t, uint32_t> index_;
};

}  // namespace switchyard::vk_impl
