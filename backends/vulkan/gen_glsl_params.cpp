// SPDX-License-Identifier: MIT
// Build-time generator: writes the GLSL mirror of the kernel table (the
// pointwise codes and one parameter struct and loader per kernel), so the
// shaders read named fields that cannot drift from the C++ side.
//   gen_glsl_params OUT.glsl
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "switchyard/backend/kernels.h"
#include "vk_params.h"

using namespace switchyard;

namespace {

std::string upper(const char* s) {
  std::string r(s);
  for (char& c : r) c = char(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

// u_i[slot / 4].xyzw
std::string slot(const char* array, int s) {
  std::string r = array;
  r += '[';
  r += std::to_string(s / 4);
  r += "].";
  r += "xyzw"[s % 4];
  return r;
}
std::string int_slot(int s) { return slot("u_i", s); }
std::string float_slot(int s) { return slot("u_f", s); }

const char* glsl_type(const ParamField& f) {
  if (f.kind == 'F') return "float";
  if (f.kind == 'W') return "uvec2";
  return std::strcmp(f.type, "bool") == 0 ? "bool" : "int";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen_glsl_params OUT.glsl\n");
    return 2;
  }
  std::string out =
      "// Generated from switchyard/backend/kernels.h by gen_glsl_params. Do not edit.\n"
      "// The kernel table's pointwise codes and, per kernel, its parameters as\n"
      "// the launch table holds them (32-bit; 64-bit words as uvec2(lo, hi)).\n\n";
  int code = 0;
#define SY_U(name) out += "const int U_" + upper(#name) + " = " + std::to_string(code++) + ";\n";
  SWITCHYARD_UNARY_OPS(SY_U)
#undef SY_U
  code = 0;
#define SY_B(name) out += "const int B_" + upper(#name) + " = " + std::to_string(code++) + ";\n";
  SWITCHYARD_BINARY_OPS(SY_B)
#undef SY_B
  out += "\n";

  struct Entry {
    const char* params;
    Kernel kernel;
  };
  const Entry entries[] = {
#define SY_E(kernel, Params, ...) {#Params, Kernel::kernel},
      SWITCHYARD_KERNELS(SY_E)
#undef SY_E
  };
  for (const Entry& e : entries) {
    // A user's kernel reads its own parameter struct (vk_custom.cpp's prelude).
    if (kernel_has(e.kernel, kUserKernel)) continue;
    const ParamLayout& l = param_layout(e.kernel);
    std::vector<int> slots(size_t(l.num_fields));
    int ints = vk_impl::table_slots(l, slots.data());
    if (ints > vk_impl::kTableInts || l.floats > vk_impl::kTableFloats) {
      std::fprintf(
          stderr,
          "gen_glsl_params: %s needs %d int and %d float slots; the launch table has %d and %d\n",
          e.params, ints, l.floats, vk_impl::kTableInts, vk_impl::kTableFloats);
      return 1;
    }
    std::string P = e.params;
    out += "// " + std::string(kernel_name(e.kernel)) + "\nstruct " + P + " {";
    for (int f = 0; f < l.num_fields; ++f) {
      const ParamField& x = l.fields[f];
      out += std::string(" ") + glsl_type(x) + " " + x.name;
      if (x.kind == 'A') {
        out += '[';
        out += std::to_string(x.count);
        out += ']';
      }
      out += ";";
    }
    out += " };\n" + P + " load_" + P + "() {\n  " + P + " q;\n";
    for (int f = 0; f < l.num_fields; ++f) {
      const ParamField& x = l.fields[f];
      std::string dst = std::string("  q.") + x.name;
      int s = slots[size_t(f)];
      if (x.kind == 'F') {
        out += dst + " = " + float_slot(s) + ";\n";
      } else if (x.kind == 'W') {
        out += dst + " = uvec2(uint(" + int_slot(s) + "), uint(" + int_slot(s + 1) + "));\n";
      } else if (x.kind == 'A') {
        for (int j = 0; j < x.count; ++j)
          out += dst + "[" + std::to_string(j) + "] = " + int_slot(s + j) + ";\n";
      } else if (std::strcmp(glsl_type(x), "bool") == 0) {
        out += dst + " = " + int_slot(s) + " != 0;\n";
      } else {
        out += dst + " = " + int_slot(s) + ";\n";
      }
    }
    out += "  return q;\n}\n";
  }
  FILE* f = std::fopen(argv[1], "wb");
  if (!f || std::fwrite(out.data(), 1, out.size(), f) != out.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "gen_glsl_params: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
