// SPDX-License-Identifier: MIT
// Custom GLSL kernels through libshaderc (see vk_custom.h).
#include "vk_custom.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "switchyard/backend/custom.h"
#include "switchyard/error.h"

// libshaderc, linked statically with glslang and SPIRV-Tools where the build
// found them (backends/vulkan/CMakeLists.txt); otherwise custom GLSL
// kernels say why they are unavailable.
#if SWITCHYARD_HAVE_SHADERC
#include <glslang/build_info.h>
#include <shaderc/shaderc.h>
#include <spirv-tools/libspirv.h>
#endif

namespace switchyard::vk_impl {
namespace {

#if SWITCHYARD_HAVE_SHADERC
// What the compiled code depends on besides the source, for cache keys.
std::string compiler_version() {
  unsigned v = 0, rev = 0;
  shaderc_get_spv_version(&v, &rev);
  return detail::cat("shaderc spv ", v, ".", rev, ", glslang ", GLSLANG_VERSION_MAJOR, ".",
                     GLSLANG_VERSION_MINOR, ".", GLSLANG_VERSION_PATCH, ", ",
                     spvSoftwareVersionDetailsString());
}

// SPIRV-Tools' validator on a module for Vulkan 1.<minor>: "" when valid,
// else its message.
std::string validate(const std::string& code, uint32_t minor) {
  const spv_target_env env = minor >= 3   ? SPV_ENV_VULKAN_1_3
                             : minor == 2 ? SPV_ENV_VULKAN_1_2
                             : minor == 1 ? SPV_ENV_VULKAN_1_1
                                          : SPV_ENV_VULKAN_1_0;
  spv_context ctx = spvContextCreate(env);
  if (!ctx) return "SPIRV-Tools could not start";
  spv_const_binary_t bin{reinterpret_cast<const uint32_t*>(code.data()), code.size() / 4};
  spv_diagnostic diag = nullptr;
  const spv_result_t r = spvValidate(ctx, &bin, &diag);
  std::string msg = diag && diag->error ? diag->error : "";
  spvDiagnosticDestroy(diag);
  spvContextDestroy(ctx);
  return r == SPV_SUCCESS ? "" : msg.empty() ? "invalid module" : msg;
}

constexpr uint32_t kSpirvMagic = 0x07230203u;

// A module's header checks out: magic, a version, a bound.
bool plausible_spirv(const std::string& b) {
  if (b.size() < 20 || b.size() % 4) return false;
  uint32_t w[5];
  std::memcpy(w, b.data(), sizeof w);
  return w[0] == kSpirvMagic && (w[1] >> 16) == 1 && w[3] > 0;
}
#endif

}  // namespace

std::string shaderc_unavailable_reason() {
#if SWITCHYARD_HAVE_SHADERC
  return "";
#elif defined(SWITCHYARD_SHADERC_WHY)
  return SWITCHYARD_SHADERC_WHY;
#else
  return "this Switchyard was built without libshaderc";
#endif
}

std::string glsl_prelude(const KernelSpec& s) {
  std::string p =
      "#version 450\n"
      "#extension GL_KHR_shader_subgroup_basic : enable\n"
      "#extension GL_KHR_shader_subgroup_arithmetic : enable\n"
      "#extension GL_KHR_shader_subgroup_ballot : enable\n"
      "#extension GL_KHR_shader_subgroup_shuffle : enable\n"
      "#extension GL_KHR_shader_subgroup_vote : enable\n";
  const char* axis[] = {"X", "Y", "Z"};
  for (int j = 0; j < 3; ++j)
    p += std::string("#define SY_WG_") + axis[j] + " " + std::to_string(s.workgroup[size_t(j)]) +
         "\n";
  p += "layout(local_size_x = SY_WG_X, local_size_y = SY_WG_Y, local_size_z = SY_WG_Z) in;\n"
       "#define SY_INPUT(i, T, name) layout(set = 0, binding = i, std430) restrict readonly "
       "buffer SyArg##i { T name[]; };\n"
       "#define SY_OUTPUT(i, T, name) layout(set = 0, binding = i, std430) restrict buffer "
       "SyArg##i { T name[]; };\n"
       "#define SY_PARAMS(T) layout(set = 0, binding = 5, std140) uniform SyLaunch { uvec4 "
       "sy_launch_[2]; T params; };\n";
  return p + custom_impl::kGlslPreludeEnd;
}

std::shared_ptr<const std::vector<uint32_t>> compile_glsl(const KernelSpec& s,
                                                          uint32_t api_version) {
  const std::string what = "custom kernel " + s.name;
  const std::string why = shaderc_unavailable_reason();
  SY_CHECK(why.empty(), what.c_str(), "expected libshaderc to compile its GLSL, found ", why);
#if SWITCHYARD_HAVE_SHADERC
  const uint32_t minor = std::min<uint32_t>((api_version >> 12) & 0x3ffu, 3);
  const uint32_t env = (1u << 22) | (minor << 12);
  const std::string source = glsl_prelude(s) + s.glsl;
  const std::string key = "glsl\n" + compiler_version() + "\nvulkan 1." + std::to_string(minor) +
                          " spv<=1.5 -O performance\n" + source;
  std::string code = custom_impl::cached_compile(
      s.name, "spv", key,
      [&] {
        shaderc_compiler_t compiler = shaderc_compiler_initialize();
        shaderc_compile_options_t opts = shaderc_compile_options_initialize();
        if (!compiler || !opts) {
          if (opts) shaderc_compile_options_release(opts);
          if (compiler) shaderc_compiler_release(compiler);
          throw Error(detail::cat("[", what, "] expected libshaderc to start, found it failed"));
        }
        shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan, env);
        shaderc_compile_options_set_optimization_level(opts,
                                                       shaderc_optimization_level_performance);
        // SPIR-V 1.6 (Vulkan 1.3's) writes the workgroup size as LocalSizeId,
        // which needs the maintenance4 feature: 1.5 at most.
        if (minor >= 3) shaderc_compile_options_set_target_spirv(opts, shaderc_spirv_version_1_5);
        const std::string file = s.name + ".comp";
        shaderc_compilation_result_t r =
            shaderc_compile_into_spv(compiler, source.data(), source.size(), shaderc_compute_shader,
                                     file.c_str(), "main", opts);
        const bool ok =
            r && shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
        std::string out =
            ok ? std::string(shaderc_result_get_bytes(r), shaderc_result_get_length(r)) : "";
        std::string msg = r ? shaderc_result_get_error_message(r) : "no result";
        if (r) shaderc_result_release(r);
        shaderc_compile_options_release(opts);
        shaderc_compiler_release(compiler);
        if (!ok)
          throw Error(detail::cat("[", what,
                                  "] expected GLSL that compiles, found errors (lines "
                                  "of its source):\n",
                                  msg));
        SY_CHECK(plausible_spirv(out), what.c_str(),
                 "expected SPIR-V from libshaderc, found a malformed module of ", out.size(),
                 " bytes");
        const std::string invalid = validate(out, minor);
        SY_CHECK(invalid.empty(), what.c_str(),
                 "expected SPIR-V that SPIRV-Tools validates, found ", invalid);
        return out;
      },
      // A disk entry is validated too before a pipeline is made of it.
      [&](const std::string& c) { return plausible_spirv(c) && validate(c, minor).empty(); });
  auto words = std::make_shared<std::vector<uint32_t>>(code.size() / 4);
  std::memcpy(words->data(), code.data(), code.size());
  return words;
#else
  (void)api_version;
  return nullptr;
#endif
}

}  // namespace switchyard::vk_impl
