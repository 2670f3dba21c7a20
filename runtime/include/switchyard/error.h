// SPDX-License-Identifier: MIT
// Errors: every failure is a switchyard::Error whose message starts with the
// operation and says what was expected and what was found.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace switchyard {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when a device (or the host) cannot provide the memory asked for.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// Thrown when a launch's sizes are past a limit of the device (its
// maxStorageBufferRange, a driver's loop budget): the same work in smaller
// pieces runs.
class DeviceLimit : public Error {
 public:
  using Error::Error;
};

// Thrown when a device stopped working: Vulkan's VK_ERROR_DEVICE_LOST, a
// queue that made no progress within the wait limit, a CUDA error that
// leaves the context unusable. Every later use of that device throws it
// too; other devices and the CPU keep working.
class DeviceLost : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... A>
std::string cat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}
}  // namespace detail

}  // namespace switchyard

// SY_CHECK(cond, "op", parts...) throws Error("[op] parts...") when cond fails.
#define SY_CHECK(cond, op, ...)                                                                    \
  do {                                                                                             \
    if (!(cond)) throw ::switchyard::Error(::switchyard::detail::cat("[", op, "] ", __VA_ARGS__)); \
  } while (0)
