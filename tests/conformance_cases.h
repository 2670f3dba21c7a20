// SPDX-License-Identifier: MIT
// The conformance suite's cases: per kernel of the table, its launches on
// host data and the double-precision reference of what each writes
// (conformance_cases.cpp). test_conformance.cpp runs them on every device.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "helpers.h"

namespace conformance {

struct HostArg {
  std::vector<uint8_t> bytes;  // initial contents (poison for outputs)
  sy::DType dtype = sy::DType::f32;
  std::vector<double> expect;  // reference values, for written arguments
};

struct Case {
  std::string name;
  sy::Instr ins;
  std::vector<HostArg> args;
  double bound = 1e-10;  // NSE bound for f32 outputs
  // bf16/f16 outputs match the reference exactly, or within this many units
  // in the last place (a kernel rounding its f32 sums: 1 at a tie's edge).
  int half_ulps = 0;
  uint64_t offset = 0;  // bytes each argument starts into its buffer (a view)
};

// Every case of kernel k: odd and tile-crossing sizes, every mode and code.
std::vector<Case> cases_for(sy::Kernel k);

}  // namespace conformance
