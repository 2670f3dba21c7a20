// SPDX-License-Identifier: MIT
// What the library does without being asked: the messages it prints and the
// files it writes. By default, messages go to stderr (never stdout) and the
// Vulkan backend keeps a pipeline cache under the user's cache directory
// (docs/environment.md lists both); an app embedding Switchyard can route
// the first and turn off the second here.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace switchyard {

// Receives each of the library's own messages: the profiler's summary at
// exit (SWITCHYARD_PROFILE=1), Vulkan validation messages
// (SWITCHYARD_VK_VALIDATION=1). A message may span lines and has no final
// newline. Called from whichever thread produced it (a driver's, or exit's),
// possibly at the same time from two: the handler locks what it shares. A
// handler that must see the summary at exit has to stay callable until then.
using MessageHandler = std::function<void(std::string_view message)>;
// An empty handler drops every message.
void set_message_handler(MessageHandler handler);
// Back to the default: each message and a newline on stderr.
void reset_message_handler();
// Hands `message` to the handler (what the library and its backends call
// instead of printing). Never throws: a throwing handler loses the message.
void emit_message(std::string_view message) noexcept;

// Files the library reads and writes unasked: today the Vulkan pipeline
// cache. Off, none is read or written from then on (a device opened before
// keeps the pipelines it compiled, but saves nothing at exit), as with
// SWITCHYARD_VK_NO_PIPELINE_CACHE=1. On by default.
void set_disk_cache(bool enabled);
// Whether the disk cache may be used: set_disk_cache's setting, and
// SWITCHYARD_VK_NO_PIPELINE_CACHE not 1.
bool disk_cache_enabled();

// The internal precision of f32 GEMMs and convolutions, as PyTorch's
// torch.set_float32_matmul_precision:
// - "highest" (the default): full FP32, so every backend agrees to FP32
//   rounding;
// - "high" and "medium": CUDA devices of compute capability 8.0 and up may
//   read f32 operands as TF32 (10 mantissa bits) on tensor cores: cuBLASLt
//   and cuDNN choose, about 1e-3 relative error for several times the
//   speed. Devices without TF32 (older GPUs, Vulkan, the CPU) keep FP32.
// Process-wide; read when a program runs (a CUDA graph recorded in one
// setting is not replayed in the other). SWITCHYARD_CUDA_TF32=1 makes
// "high" the starting value. Anything else throws Error naming the three.
void set_float32_matmul_precision(std::string_view precision);
std::string float32_matmul_precision();

namespace detail {
// Whether the setting above allows TF32 (what the CUDA backend reads).
bool float32_matmul_allows_tf32() noexcept;
}  // namespace detail

}  // namespace switchyard
