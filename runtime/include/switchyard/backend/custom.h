// SPDX-License-Identifier: MIT
// The backend side of custom kernels (switchyard/custom.h): the registry a
// launch's CustomParams id points into, and the compile cache every backend
// shares (in memory and on disk, counted in custom_kernel_stats()).
#pragma once
// Marks the backend API, so user-only code can check it stays out.
#define SWITCHYARD_BACKEND_API 1
#include <functional>
#include <memory>
#include <string>

#include "switchyard/backend/kernels.h"
#include "switchyard/custom.h"

namespace switchyard::custom_impl {

// The registered kernel `id` (CustomParams::id); throws for an unknown id.
const KernelSpec& spec(int64_t id);

// A launch's scalar parameters (CustomParams w0-w7), as the bytes the user's
// struct was.
void param_bytes(const CustomParams& p, unsigned char out[kCustomParamBytes]);

// Compiled code for `key` (everything it depends on: the full source, the
// options, the compiler and its version): from this process's cache, else
// from the disk cache (custom_kernel_cache_dir(), file `<name>-<hash>.<ext>`,
// checked by length, hash and its stored key: a file that fails is counted
// corrupt and compiled again), else from compile(), whose result is stored
// in both (written atomically). `check` may refuse a disk entry's payload
// (false: corrupt). Thread-safe; compile() may throw (nothing is stored).
std::string cached_compile(const std::string& name, const char* ext, const std::string& key,
                           const std::function<std::string()>& compile,
                           const std::function<bool(const std::string&)>& check = {});

// A launch's name for messages: "custom kernel <name>" for a custom kernel,
// else the kernel table's name.
std::string display_name(const KernelParams& p);

// Source lines for messages: "<name>:<line>" names a line of the user's
// source (the preludes end with a #line 1 directive).
inline constexpr const char* kGlslPreludeEnd = "#line 1\n";

}  // namespace switchyard::custom_impl
