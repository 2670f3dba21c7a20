// SPDX-License-Identifier: MIT
// The operating system's few services the runtime and backends need beyond
// the C++ library, behind one interface: POSIX (Linux, macOS) and Windows
// implementations live in runtime/src/platform.cpp, the only place besides
// runtime/src/files.cpp where system headers are included.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace switchyard::platform {

// A shared library opened at run time (dlopen; on Windows LoadLibraryEx
// from the system's and the application's directories), or null with
// `*error` saying why. `lazy`: symbols resolved when first used (POSIX).
void* open_library(const char* name, std::string* error, bool lazy = false);
// A symbol of a library open_library returned; null when it has none.
void* library_symbol(void* library, const char* name);
void close_library(void* library);
// The machine's physical memory; 0 when the system does not say.
uint64_t physical_memory_bytes();
// `bytes` (a multiple of `alignment`) aligned to `alignment`; null when
// there is no memory. Released with aligned_free.
void* aligned_alloc(size_t alignment, size_t bytes);
void aligned_free(void* p);
// The most memory this process has held resident so far (peak RSS; on
// Windows the peak working set); 0 when the system does not say.
uint64_t peak_resident_bytes();
// Whether stderr is a terminal (progress lines are drawn only there).
bool stderr_is_terminal();
// This process's id.
long process_id();
// Whether the process `pid` is known to be gone (false when it runs, or
// when the system will not say).
bool process_gone(long pid);

}  // namespace switchyard::platform
