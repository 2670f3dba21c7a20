// The emulated CUDA runtime (see cudart_emu.h).
#include "cudart_emu.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<size_t> used{0};
constexpr size_t kHeader = 256;  // keeps the size in front; blocks stay 256-byte aligned, as cudaMalloc's

void* host_block(size_t bytes) {
  char* p = static_cast<char*>(std::aligned_alloc(kHeader, kHeader + (bytes + kHeader - 1) / kHeader * kHeader));
  if (!p) return nullptr;
  std::memcpy(p, &bytes, sizeof(bytes));
  return p + kHeader;
}
size_t block_bytes(void* p) {
  size_t n;
  std::memcpy(&n, static_cast<char*>(p) - kHeader, sizeof(n));
  return n;
}
void free_block(void* p) { std::free(static_cast<char*>(p) - kHeader); }

using sy_emu::refused_in_capture;

}  // namespace

cudaError_t sy_emu_cudaGetLastError() { return cudaSuccess; }
const char* sy_emu_cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    default: return "cudaErrorUnknown";
  }
}
const char* sy_emu_cudaGetErrorString(cudaError_t e) { return sy_emu_cudaGetErrorName(e); }
cudaError_t sy_emu_cudaSetDevice(int) { return cudaSuccess; }

cudaError_t sy_emu_cudaMalloc(void** p, size_t bytes) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  if (used + bytes > sy_emu::memory_limit) return cudaErrorMemoryAllocation;
  *p = host_block(bytes);
  if (!*p) return cudaErrorMemoryAllocation;
  used += bytes;
  return cudaSuccess;
}
cudaError_t sy_emu_cudaFree(void* p) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  if (p) {
    used -= block_bytes(p);
    free_block(p);
  }
  return cudaSuccess;
}
cudaError_t sy_emu_cudaHostAlloc(void** p, size_t bytes, unsigned) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  *p = host_block(bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t sy_emu_cudaFreeHost(void* p) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  if (p) free_block(p);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = sy_emu::memory_limit;
  *free_bytes = sy_emu::memory_limit - used;
  return cudaSuccess;
}

cudaError_t sy_emu_cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t) {
  sy_emu::enqueue([=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
cudaError_t sy_emu_cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  sy_emu::enqueue([=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t sy_emu_cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  static char stream_tag;
  *s = reinterpret_cast<cudaStream_t>(&stream_tag);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t sy_emu_cudaStreamSynchronize(cudaStream_t) {
  return refused_in_capture() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}
cudaError_t sy_emu_cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = reinterpret_cast<cudaEvent_t>(new char);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaEventRecord(cudaEvent_t, cudaStream_t) {
  // The backend records events for transfers only, never inside a capture.
  return refused_in_capture() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}
cudaError_t sy_emu_cudaEventSynchronize(cudaEvent_t) {
  return refused_in_capture() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}
cudaError_t sy_emu_cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<char*>(e);
  return cudaSuccess;
}

cudaError_t sy_emu_cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  if (sy_emu::capturing) return cudaErrorIllegalState;
  sy_emu::capturing_thread = std::this_thread::get_id();
  sy_emu::capturing = new sy_emu::Graph;
  return cudaSuccess;
}
cudaError_t sy_emu_cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  if (!sy_emu::capturing) return cudaErrorIllegalState;
  *g = reinterpret_cast<cudaGraph_t>(sy_emu::capturing.exchange(nullptr));
  return cudaSuccess;
}
cudaError_t sy_emu_cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long) {
  *exec = reinterpret_cast<cudaGraphExec_t>(new sy_emu::Graph(*reinterpret_cast<sy_emu::Graph*>(g)));
  return cudaSuccess;
}
cudaError_t sy_emu_cudaGraphDestroy(cudaGraph_t g) {
  delete reinterpret_cast<sy_emu::Graph*>(g);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<sy_emu::Graph*>(exec);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  for (auto& node : reinterpret_cast<sy_emu::Graph*>(exec)->nodes) node();
  return cudaSuccess;
}
