// SPDX-License-Identifier: MIT
// Setting the environment from a test, on POSIX and Windows.
#pragma once
#include <cstdlib>

inline void set_env(const char* name, const char* value, bool overwrite = true) {
#if defined(_WIN32)
  if (!overwrite && std::getenv(name)) return;
  _putenv_s(name, value);
#else
  setenv(name, value, overwrite ? 1 : 0);
#endif
}

inline void unset_env(const char* name) {
#if defined(_WIN32)
  _putenv_s(name, "");  // removes it
#else
  unsetenv(name);
#endif
}
