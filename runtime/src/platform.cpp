// SPDX-License-Identifier: MIT
// The platform layer (switchyard/backend/platform.h): POSIX and Windows.
#include "switchyard/backend/platform.h"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(_WIN32)
// windows.h first: psapi.h needs its types.
// clang-format off
#include <windows.h>
#include <io.h>
#include <process.h>
#include <psapi.h>
// clang-format on
#else
#include <dlfcn.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#endif

namespace switchyard::platform {

#if defined(_WIN32)

void* open_library(const char* name, std::string* error, bool) {
  // The system's directories and the application's, never the current one.
  HMODULE h = LoadLibraryExA(name, nullptr, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
  if (!h && error) {
    char msg[256] = "";
    DWORD code = GetLastError();
    FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr, code, 0,
                   msg, sizeof msg, nullptr);
    std::string m = msg;
    while (!m.empty() && (m.back() == '\n' || m.back() == '\r' || m.back() == ' ')) m.pop_back();
    *error = std::string(name) + ": " + (m.empty() ? "LoadLibrary failed" : m) + " (error " +
             std::to_string(code) + ")";
  }
  return reinterpret_cast<void*>(h);
}

void* library_symbol(void* library, const char* name) {
  return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(library), name));
}

void close_library(void* library) { FreeLibrary(static_cast<HMODULE>(library)); }

uint64_t physical_memory_bytes() {
  MEMORYSTATUSEX m{};
  m.dwLength = sizeof m;
  return GlobalMemoryStatusEx(&m) ? uint64_t(m.ullTotalPhys) : 0;
}

void* aligned_alloc(size_t alignment, size_t bytes) { return _aligned_malloc(bytes, alignment); }
void aligned_free(void* p) { _aligned_free(p); }

uint64_t peak_resident_bytes() {
  PROCESS_MEMORY_COUNTERS c{};
  return GetProcessMemoryInfo(GetCurrentProcess(), &c, sizeof c) ? uint64_t(c.PeakWorkingSetSize)
                                                                 : 0;
}

bool stderr_is_terminal() {  // a console, not NUL (which _isatty also takes)
  DWORD mode = 0;
  return GetConsoleMode(GetStdHandle(STD_ERROR_HANDLE), &mode) != 0;
}

long process_id() { return long(_getpid()); }

bool process_gone(long pid) {
  if (pid <= 0 || pid > long(UINT32_MAX)) return false;
  HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, DWORD(pid));
  if (!h) return GetLastError() == ERROR_INVALID_PARAMETER;  // no such process
  DWORD code = 0;
  bool gone = GetExitCodeProcess(h, &code) && code != STILL_ACTIVE;
  CloseHandle(h);
  return gone;
}

#else

void* open_library(const char* name, std::string* error, bool lazy) {
  void* lib = dlopen(name, (lazy ? RTLD_LAZY : RTLD_NOW) | RTLD_LOCAL);
  if (!lib && error) {
    const char* e = dlerror();
    *error = e ? e : std::string(name) + ": dlopen failed";
  }
  return lib;
}

void* library_symbol(void* library, const char* name) { return dlsym(library, name); }

void close_library(void* library) { dlclose(library); }

uint64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

void* aligned_alloc(size_t alignment, size_t bytes) { return std::aligned_alloc(alignment, bytes); }
void aligned_free(void* p) { std::free(p); }

uint64_t peak_resident_bytes() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
#if defined(__APPLE__)
  return uint64_t(u.ru_maxrss);  // bytes on macOS
#else
  return uint64_t(u.ru_maxrss) * 1024;  // KiB on Linux
#endif
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) != 0; }

long process_id() { return long(::getpid()); }

bool process_gone(long pid) {
  if (pid <= 0 || pid > long(INT_MAX)) return false;  // never a group or a wrapped id
  return ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
}

#endif

}  // namespace switchyard::platform
