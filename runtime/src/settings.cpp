// SPDX-License-Identifier: MIT
// The library's messages and disk cache (see switchyard/settings.h).
#include "switchyard/settings.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "switchyard/error.h"

namespace switchyard {

namespace {

struct Messages {
  std::mutex mu;
  // Null: the default (stderr). Copied out under the lock and called
  // outside it, so a handler may itself set another.
  std::shared_ptr<const MessageHandler> handler;
};
Messages& messages() {
  static Messages* m = new Messages;  // never destroyed: exit's reports use it
  return *m;
}

std::atomic<bool> g_disk_cache{true};

// 0 highest, 1 high, 2 medium; the start value from the environment.
std::atomic<int>& matmul_precision() {
  static std::atomic<int> level{[] {
    const char* e = std::getenv("SWITCHYARD_CUDA_TF32");
    return e && std::strcmp(e, "1") == 0 ? 1 : 0;
  }()};
  return level;
}
constexpr const char* kMatmulPrecisions[] = {"highest", "high", "medium"};

}  // namespace

// The old handler is released outside the lock (its destructor may emit).
void set_message_handler(MessageHandler handler) {
  auto h = std::make_shared<const MessageHandler>(std::move(handler));
  {
    std::lock_guard lock(messages().mu);
    messages().handler.swap(h);
  }
}

void reset_message_handler() {
  std::shared_ptr<const MessageHandler> old;
  {
    std::lock_guard lock(messages().mu);
    messages().handler.swap(old);
  }
}

void emit_message(std::string_view message) noexcept {
  std::shared_ptr<const MessageHandler> h;
  {
    std::lock_guard lock(messages().mu);
    h = messages().handler;
  }
  if (!h) {
    std::fprintf(stderr, "%.*s\n", int(message.size()), message.data());
    return;
  }
  if (!*h) return;  // silenced
  try {
    (*h)(message);
  } catch (...) {  // the handler's own failure: the message is lost, nothing else
  }
}

void set_disk_cache(bool enabled) { g_disk_cache.store(enabled); }

bool disk_cache_enabled() {
  if (!g_disk_cache.load()) return false;
  const char* e = std::getenv("SWITCHYARD_VK_NO_PIPELINE_CACHE");
  return !(e && *e && std::strcmp(e, "0") != 0);
}

void set_float32_matmul_precision(std::string_view precision) {
  for (int i = 0; i < 3; ++i)
    if (precision == kMatmulPrecisions[i]) {
      matmul_precision().store(i);
      return;
    }
  throw Error(
      detail::cat("[set_float32_matmul_precision] expected \"highest\", \"high\" or "
                  "\"medium\", found \"",
                  precision, "\""));
}

std::string float32_matmul_precision() { return kMatmulPrecisions[matmul_precision().load()]; }

bool detail::float32_matmul_allows_tf32() noexcept { return matmul_precision().load() > 0; }

}  // namespace switchyard
