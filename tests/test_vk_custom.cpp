// SPDX-License-Identifier: MIT
// Custom GLSL kernels checked before a pipeline is made of them
// (backends/vulkan/vk_custom_check.cpp), white-box: the SPIR-V libshaderc
// makes of a user's source against its spec and against the devices users
// have and this machine does not (no double, no 64-bit integers, fewer
// subgroup operations, less shared memory), through faked device facts.
// The launch path's errors on lavapipe are in test_custom.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "switchyard/error.h"
#include "test_env.h"
#include "vk_custom.h"

namespace vi = switchyard::vk_impl;
namespace sy = switchyard;

namespace {

// A device with everything this check looks at.
vi::CustomDeviceCaps full() {
  vi::CustomDeviceCaps c;
  c.device = "fake:0";
  c.float64 = c.int64 = c.int16 = true;
  c.subgroup_in_compute = true;
  c.subgroup_ops = 0xff;
  c.max_shared_bytes = 49152;
  return c;
}

sy::KernelSpec spec(std::string name, std::string glsl, size_t params_bytes = 0) {
  return sy::KernelSpec{.name = std::move(name),
                        .glsl = std::move(glsl),
                        .inputs = {{"x"}},
                        .outputs = {{"y"}},
                        .params_bytes = params_bytes};
}

// The message check_custom_module throws for `s` on `caps` ("" when none).
std::string check(const sy::KernelSpec& s, const vi::CustomDeviceCaps& caps = full()) {
  auto code = vi::compile_glsl(s, (1u << 22) | (3u << 12));
  try {
    vi::check_custom_module(s, *code, caps);
  } catch (const sy::Error& e) {
    return e.what();
  }
  return "";
}

class VkCustomCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = vi::shaderc_unavailable_reason(); !why.empty())
      GTEST_SKIP() << "no GLSL compiler in this build: " << why;
  }
};

constexpr const char* kCopy =
    "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
    "void main() { y[gl_GlobalInvocationID.x] = x[gl_GlobalInvocationID.x]; }\n";

}  // namespace

TEST_F(VkCustomCheck, AWellFormedKernelPasses) {
  EXPECT_EQ(check(spec("copy", kCopy)), "");
  // Parameters that fit: a uint and a float (8 bytes) in 8 declared bytes.
  EXPECT_EQ(check(spec("scaled",
                       "struct P { uint n; float a; };\nSY_PARAMS(P)\n"
                       "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                       "void main() { uint i = gl_GlobalInvocationID.x;\n"
                       "  if (i < params.n) y[i] = params.a * x[i]; }\n",
                       8)),
            "");
  // One input read through two blocks (floats and vec4s) at one binding.
  EXPECT_EQ(check(spec("two_views",
                       "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                       "layout(set = 0, binding = 1, std430) restrict readonly buffer X4 "
                       "{ vec4 x4[]; };\n"
                       "void main() { uint i = gl_GlobalInvocationID.x;\n"
                       "  y[i] = x[i] + x4[i / 4u].x; }\n")),
            "");
  // A row-major mat4x2 (four columns, two rows): two rows of 16 bytes, 32.
  EXPECT_EQ(check(spec("row_major",
                       "layout(row_major) uniform;\nstruct P { mat4x2 m; };\nSY_PARAMS(P)\n"
                       "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                       "void main() { y[0] = params.m[3][1] * x[0]; }\n",
                       32)),
            "");
}

TEST_F(VkCustomCheck, AnInputThatIsWrittenIsRefused) {
  // Hazards come from the declared roles: a written input would race.
  const std::string m =
      check(spec("writes_input",
                 "SY_OUTPUT(0, float, y)\n"
                 "layout(set = 0, binding = 1, std430) buffer In { float x[]; };\n"
                 "void main() { uint i = gl_GlobalInvocationID.x;\n"
                 "  y[i] = x[i]; x[i] = 0.0; }\n"));
  EXPECT_NE(m.find("[custom kernel writes_input] expected binding 1 (input 'x') to be read-only"),
            std::string::npos)
      << m;
}

TEST_F(VkCustomCheck, BindingsPastTheArgumentsAreRefused) {
  std::string m =
      check(spec("extra_binding",
                 "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\nSY_INPUT(2, float, z)\n"
                 "void main() { uint i = gl_GlobalInvocationID.x; y[i] = x[i] + z[i]; }\n"));
  EXPECT_NE(m.find("expected bindings 0 to 1 (1 outputs, then 1 inputs) and 5 (SY_PARAMS), found "
                   "binding 2"),
            std::string::npos)
      << m;
  m = check(spec("binding6",
                 "SY_OUTPUT(0, float, y)\nSY_INPUT(6, float, x)\n"
                 "void main() { y[0] = x[0]; }\n"));
  EXPECT_NE(m.find("found binding 6, which is Switchyard's"), std::string::npos) << m;
  m = check(spec("other_set",
                 "SY_OUTPUT(0, float, y)\n"
                 "layout(set = 1, binding = 1) readonly buffer In { float x[]; };\n"
                 "void main() { y[0] = x[0]; }\n"));
  EXPECT_NE(m.find("expected every binding in descriptor set 0, found binding 1 in set 1"),
            std::string::npos)
      << m;
  m = check(spec("image",
                 "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                 "layout(set = 0, binding = 2, r32f) uniform readonly image2D img;\n"
                 "void main() { y[0] = x[0] + imageLoad(img, ivec2(0)).x; }\n"));
  EXPECT_NE(m.find("expected buffers only"), std::string::npos) << m;
  m = check(spec("push",
                 "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                 "layout(push_constant) uniform P { float a; } pc;\n"
                 "void main() { y[0] = pc.a * x[0]; }\n"));
  EXPECT_NE(m.find("found a push-constant block"), std::string::npos) << m;
}

TEST_F(VkCustomCheck, AParameterBlockLargerThanTheDeclaredBytesIsRefused) {
  // C++ { uint n; float a; float v[3]; } is 20 bytes; std140 puts the vec3
  // at 16, so the block spans 28.
  const std::string m = check(spec("vec3_params",
                                   "struct P { uint n; float a; vec3 v; };\nSY_PARAMS(P)\n"
                                   "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                                   "void main() { y[0] = params.v.z * x[0]; }\n",
                                   20));
  EXPECT_NE(m.find("expected parameters that fit the 20 bytes of KernelSpec::params_bytes, found "
                   "the GLSL block spans 28 bytes"),
            std::string::npos)
      << m;
  // An array of floats: 16 bytes an element in std140.
  const std::string a = check(spec("array_params",
                                   "struct P { float w[4]; };\nSY_PARAMS(P)\n"
                                   "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                                   "void main() { y[0] = params.w[3] * x[0]; }\n",
                                   16));
  EXPECT_NE(a.find("found the GLSL block spans 64 bytes"), std::string::npos) << a;
}

TEST_F(VkCustomCheck, CapabilitiesTheDeviceLacksAreRefused) {
  const auto dbl = spec("double_sum",
                        "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                        "void main() { double s = 0.0;\n"
                        "  for (int i = 0; i < 4; ++i) s += double(x[i]);\n"
                        "  y[0] = float(s); }\n");
  EXPECT_EQ(check(dbl), "");
  auto no64 = full();
  no64.float64 = false;
  std::string m = check(dbl, no64);
  EXPECT_NE(m.find("needs SPIR-V capability Float64, which it lacks"), std::string::npos) << m;

  const auto sg = spec("subgroup_sum",
                       "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                       "void main() { uint i = gl_GlobalInvocationID.x;\n"
                       "  y[i] = subgroupAdd(x[i]); }\n");
  EXPECT_EQ(check(sg), "");
  auto basic = full();
  basic.subgroup_ops = 0x1;  // VK_SUBGROUP_FEATURE_BASIC_BIT only (older mobile drivers)
  m = check(sg, basic);
  EXPECT_NE(m.find("GroupNonUniformArithmetic, which it lacks"), std::string::npos) << m;
  auto no_compute = full();
  no_compute.subgroup_in_compute = false;
  EXPECT_NE(check(sg, no_compute).find("GroupNonUniform"), std::string::npos);

  const auto half = spec("half_math",
                         "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
                         "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                         "void main() { float16_t h = float16_t(x[0]); y[0] = float(h * h); }\n");
  m = check(half);
  EXPECT_NE(m.find("found capability Float16 (9)"), std::string::npos) << m;
}

TEST_F(VkCustomCheck, SharedMemoryPastTheDeviceLimitIsRefused) {
  const auto s = spec("big_shared",
                      "SY_OUTPUT(0, float, y)\nSY_INPUT(1, float, x)\n"
                      "shared vec4 tile[2048];\n"  // 32 KiB
                      "void main() { uint i = gl_LocalInvocationID.x;\n"
                      "  tile[i] = vec4(x[i]); barrier(); y[i] = tile[(i + 1) % 2048].x; }\n");
  EXPECT_EQ(check(s), "");
  auto small = full();
  small.max_shared_bytes = 16384;  // the least Vulkan allows
  const std::string m = check(s, small);
  EXPECT_NE(m.find("expected at most 16384 bytes of shared memory (maxComputeSharedMemorySize of "
                   "fake:0), found 32768"),
            std::string::npos)
      << m;
}
