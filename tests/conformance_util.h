// SPDX-License-Identifier: MIT
// Internal to the conformance suite: building cases (inputs, poisoned
// outputs with their expected values) and the cases of the layer kernels
// (conformance_cases_nn.cpp).
#pragma once
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "conformance_cases.h"

namespace conformance {

template <class T>
inline HostArg input(const std::vector<T>& v, sy::DType t) {
  HostArg a;
  a.dtype = t;
  a.bytes.resize(v.size() * sizeof(T));
  std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  return a;
}
inline HostArg f32(const std::vector<float>& v) { return input(v, sy::DType::f32); }
inline HostArg i32(const std::vector<int32_t>& v) { return input(v, sy::DType::i32); }
inline HostArg i64(const std::vector<int64_t>& v) { return input(v, sy::DType::i64); }
inline HostArg u8(const std::vector<uint8_t>& v) { return input(v, sy::DType::u8); }
// An output of n elements, poisoned, with its expected values.
inline HostArg out(sy::DType t, std::vector<double> expect) {
  HostArg a;
  a.dtype = t;
  a.bytes.assign(expect.size() * sy::dtype_size(t), 0xff);
  a.expect = std::move(expect);
  return a;
}
inline HostArg outf(std::vector<double> e) { return out(sy::DType::f32, std::move(e)); }

// A case of the kernel `p` belongs to.
inline Case make(std::string name, std::vector<HostArg> args, const sy::KernelParams& p) {
  Case c;
  c.name = std::move(name);
  c.ins.kernel = p.kernel();
  // A multi-tensor kernel's arguments are the Program's more_args (run_case).
  const bool multi = sy::kernel_has(p.kernel(), sy::kMultiTensor);
  c.ins.nargs = multi ? 0 : uint8_t(args.size());
  c.ins.nmore = multi ? uint32_t(args.size()) : 0;
  c.ins.params = p;
  c.args = std::move(args);
  return c;
}

// "3x17x5"
inline std::string sz(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t x : dims) {
    if (!s.empty()) s += 'x';
    s += std::to_string(x);
  }
  return s;
}

// Cases of swap_axes, the convolutions, the pooling and the per-channel kernels.
std::vector<Case> layer_cases(sy::Kernel k);
// Cases of the optimizers' kernels (conformance_cases_optim.cpp).
std::vector<Case> optimizer_cases(sy::Kernel k);

}  // namespace conformance
