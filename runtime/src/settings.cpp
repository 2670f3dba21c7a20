// SPDX-License-Identifier: MIT
// The library's messages and disk cache (see switchyard/settings.h).
#include "switchyard/settings.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

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

}  // namespace switchyard
