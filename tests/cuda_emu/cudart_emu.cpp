// SPDX-License-Identifier: MIT
// The emulated CUDA runtime (see cudart_emu.h and cuda_emu.h).
#include "cudart_emu.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#if SY_EMU_ASM_SWITCH
// sy_emu_switch(save_sp, load_sp): pushes the callee-saved registers and the
// FP control words (MXCSR, x87), stores the stack pointer in *save_sp, then
// pops the same from load_sp and returns into that fiber (System V ABI).
asm(R"(
  .text
  .globl sy_emu_switch
  .type sy_emu_switch, @function
sy_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size sy_emu_switch, .-sy_emu_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif

namespace {

using sy_emu::refused_in_capture;

enum class Kind { device, pinned };
struct Alloc {
  size_t bytes;
  Kind kind;
};
// Live allocations (leaked on purpose: devices are torn down at exit, after
// function-local statics might be gone).
std::map<const char*, Alloc>& allocs() {
  static auto* m = new std::map<const char*, Alloc>;
  return *m;
}
std::mutex allocs_mu;
std::atomic<size_t> used{0};

// The allocation p points into, if any.
const Alloc* find(const void* p, size_t n = 1) {
  std::lock_guard lock(allocs_mu);
  auto& m = allocs();
  auto it = m.upper_bound(static_cast<const char*>(p));
  if (it == m.begin()) return nullptr;
  --it;
  const char* c = static_cast<const char*>(p);
  return c >= it->first && c + n <= it->first + it->second.bytes ? &it->second : nullptr;
}

cudaError_t allocate(void** p, size_t bytes, Kind kind) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  if (kind == Kind::device && used + bytes > sy_emu::memory_limit)
    return sy_emu::last_error = cudaErrorMemoryAllocation;
  size_t rounded = (bytes + 255) / 256 * 256;  // 256-byte aligned, as cudaMalloc's
  *p = std::aligned_alloc(256, rounded ? rounded : 256);
  if (!*p) return sy_emu::last_error = cudaErrorMemoryAllocation;
  if (kind == Kind::device) {
    used += bytes;
    std::memset(*p, 0xa5, rounded);  // device memory starts as garbage
  }
  std::lock_guard lock(allocs_mu);
  allocs()[static_cast<const char*>(*p)] = {bytes, kind};
  return cudaSuccess;
}

cudaError_t release(void* p, Kind kind) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  if (!p) return cudaSuccess;
  sy_emu::drain();  // cudaFree and cudaFreeHost wait for the device
  std::lock_guard lock(allocs_mu);
  auto it = allocs().find(static_cast<const char*>(p));
  if (it == allocs().end() || it->second.kind != kind)
    sy_emu::fail("free of a pointer that is not a live allocation of that kind");
  if (kind == Kind::device) used -= it->second.bytes;
  allocs().erase(it);
  std::free(p);
  return cudaSuccess;
}

struct Event {
  uint64_t at = 0;     // operations queued when it was recorded
  bool timing = true;  // created without cudaEventDisableTiming
  bool recorded = false;
  std::shared_ptr<std::atomic<int64_t>> when;  // ns when the stream reached it; -1 before
};

}  // namespace

cudaError_t sy_emu_cudaGetLastError() {
  cudaError_t e = sy_emu::last_error;
  sy_emu::last_error = cudaSuccess;
  return e;
}
const char* sy_emu_cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    default:
      return "cudaErrorUnknown";
  }
}
const char* sy_emu_cudaGetErrorString(cudaError_t e) { return sy_emu_cudaGetErrorName(e); }
cudaError_t sy_emu_cudaSetDevice(int) { return cudaSuccess; }

cudaError_t sy_emu_cudaMalloc(void** p, size_t bytes) { return allocate(p, bytes, Kind::device); }
cudaError_t sy_emu_cudaFree(void* p) { return release(p, Kind::device); }
cudaError_t sy_emu_cudaHostAlloc(void** p, size_t bytes, unsigned) {
  return allocate(p, bytes, Kind::pinned);
}
cudaError_t sy_emu_cudaFreeHost(void* p) { return release(p, Kind::pinned); }
cudaError_t sy_emu_cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = sy_emu::memory_limit;
  *free_bytes = sy_emu::memory_limit - used;
  return cudaSuccess;
}

cudaError_t sy_emu_cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                                   cudaStream_t s) {
  if (!sy_emu::on_device_stream(s)) return cudaErrorInvalidResourceHandle;
  if (bytes == 0) return cudaSuccess;
  const char *d = static_cast<const char*>(dst), *c = static_cast<const char*>(src);
  if (c < d + bytes && d < c + bytes)
    sy_emu::fail("cudaMemcpyAsync with overlapping ranges (undefined in CUDA)");
  const Alloc* from = find(src, bytes);
  const Alloc* to = find(dst, bytes);
  if (!from && !to) sy_emu::fail("cudaMemcpyAsync between two pointers CUDA did not allocate");
  if (!from || !to) {
    // Pageable host memory: CUDA stages it before returning (host to device)
    // or completes the copy before returning (device to host); neither may
    // happen in a capture.
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    if (!to) {
      sy_emu::drain();
      std::memcpy(dst, src, bytes);
      return cudaSuccess;
    }
    auto staged = std::make_shared<std::vector<char>>(c, c + bytes);
    sy_emu::enqueue([=] { std::memcpy(dst, staged->data(), bytes); }, sy_emu::kMemcpyNode);
    return cudaSuccess;
  }
  sy_emu::enqueue([=] { std::memcpy(dst, src, bytes); }, sy_emu::kMemcpyNode);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  if (!sy_emu::on_device_stream(s)) return cudaErrorInvalidResourceHandle;
  if (!find(p, bytes)) sy_emu::fail("cudaMemsetAsync outside any allocation");
  sy_emu::enqueue([=] { std::memset(p, value, bytes); }, sy_emu::kMemsetNode);
  return cudaSuccess;
}

cudaError_t sy_emu_cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  static char stream_tag;
  if (sy_emu::device_stream) sy_emu::fail("the emulation has one device and one stream");
  *s = sy_emu::device_stream = reinterpret_cast<cudaStream_t>(&stream_tag);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaStreamDestroy(cudaStream_t s) {
  if (!sy_emu::on_device_stream(s)) return cudaErrorInvalidResourceHandle;
  sy_emu::drain();
  sy_emu::device_stream = nullptr;
  return cudaSuccess;
}
cudaError_t sy_emu_cudaStreamSynchronize(cudaStream_t s) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  if (!sy_emu::on_device_stream(s)) return cudaErrorInvalidResourceHandle;
  sy_emu::drain();
  return cudaSuccess;
}
cudaError_t sy_emu_cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  auto* ev = new Event;
  ev->timing = !(flags & cudaEventDisableTiming);
  *e = reinterpret_cast<cudaEvent_t>(ev);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!sy_emu::on_device_stream(s)) return cudaErrorInvalidResourceHandle;
  if (sy_emu::capturing) return cudaSuccess;  // a node in the graph; the backend never waits on one
  auto* ev = reinterpret_cast<Event*>(e);
  if (ev->timing) {
    // A timing event is a marker the stream passes: it takes the time then.
    auto when = std::make_shared<std::atomic<int64_t>>(-1);
    sy_emu::enqueue([when] {
      *when = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
    });
    std::lock_guard lock(sy_emu::stream_mu);
    ev->when = when;
    ev->recorded = true;
    ev->at = sy_emu::enqueued;
    return cudaSuccess;
  }
  std::lock_guard lock(sy_emu::stream_mu);
  ev->at = sy_emu::enqueued;
  ev->recorded = true;
  return cudaSuccess;
}
// As CUDA's: both events timing, recorded and complete; milliseconds.
cudaError_t sy_emu_cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  auto* a = reinterpret_cast<Event*>(start);
  auto* b = reinterpret_cast<Event*>(end);
  if (!a->timing || !b->timing) return sy_emu::last_error = cudaErrorInvalidResourceHandle;
  if (!a->recorded || !b->recorded || !a->when || !b->when || *a->when < 0 || *b->when < 0)
    return sy_emu::last_error = cudaErrorNotReady;
  *ms = float(double(*b->when - *a->when) * 1e-6);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaEventSynchronize(cudaEvent_t e) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  uint64_t at;
  {
    std::lock_guard lock(sy_emu::stream_mu);
    at = reinterpret_cast<Event*>(e)->at;
  }
  sy_emu::drain(at);  // exactly the work queued before the record
  return cudaSuccess;
}
cudaError_t sy_emu_cudaEventQuery(cudaEvent_t e) {
  std::lock_guard lock(sy_emu::stream_mu);
  // As the runtime: "not ready" is also recorded as the thread's last error
  // (a caller that polls must clear it before its next launch check).
  if (sy_emu::completed >= reinterpret_cast<Event*>(e)->at) return cudaSuccess;
  return sy_emu::last_error = cudaErrorNotReady;
}
cudaError_t sy_emu_cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<Event*>(e);
  return cudaSuccess;
}

cudaError_t sy_emu_cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  if (!sy_emu::on_device_stream(s)) return cudaErrorInvalidResourceHandle;
  if (sy_emu::capturing) return cudaErrorIllegalState;
  sy_emu::capture_invalidated = false;
  sy_emu::capturing_thread = std::this_thread::get_id();
  sy_emu::capturing = new sy_emu::Graph;
  return cudaSuccess;
}
cudaError_t sy_emu_cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  if (!sy_emu::capturing) return cudaErrorIllegalState;
  auto* graph = sy_emu::capturing.exchange(nullptr);
  if (sy_emu::capture_invalidated) {
    delete graph;
    *g = nullptr;
    return cudaErrorStreamCaptureInvalidated;
  }
  *g = reinterpret_cast<cudaGraph_t>(graph);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  if (!sy_emu::on_device_stream(s)) return cudaErrorInvalidResourceHandle;
  *status = sy_emu::capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t sy_emu_cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t g,
                                                 unsigned long long) {
  // SY_EMU_FAIL_INSTANTIATE=1: as a driver that cannot instantiate the graph
  // (the backend must run the Program eagerly instead).
  if (const char* f = std::getenv("SY_EMU_FAIL_INSTANTIATE"); f && std::string(f) == "1")
    return sy_emu::last_error = cudaErrorNotSupported;
  auto* copy =
      new std::shared_ptr<sy_emu::Graph>(new sy_emu::Graph(*reinterpret_cast<sy_emu::Graph*>(g)));
  *exec = reinterpret_cast<cudaGraphExec_t>(copy);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaGraphDestroy(cudaGraph_t g) {
  delete reinterpret_cast<sy_emu::Graph*>(g);
  return cudaSuccess;
}
cudaError_t sy_emu_cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<std::shared_ptr<sy_emu::Graph>*>(exec);  // queued launches keep it alive
  return cudaSuccess;
}
cudaError_t sy_emu_cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  if (!sy_emu::on_device_stream(s)) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<sy_emu::Graph> graph = *reinterpret_cast<std::shared_ptr<sy_emu::Graph>*>(exec);
  sy_emu::enqueue([graph] {
    for (auto& node : graph->nodes) node();
  });
  return cudaSuccess;
}
// As CUDA's: the new graph's node parameters replace the executable graph's
// when the topology is the same (here: the same node kinds, in order);
// launches already queued keep the old ones. SY_EMU_FAIL_UPDATE=1: every
// update is refused, as a driver that cannot apply it.
namespace {
cudaGraphExecUpdateResult graph_exec_update(cudaGraphExec_t exec, cudaGraph_t g) {
  auto& held = *reinterpret_cast<std::shared_ptr<sy_emu::Graph>*>(exec);
  auto* graph = reinterpret_cast<sy_emu::Graph*>(g);
  if (const char* f = std::getenv("SY_EMU_FAIL_UPDATE"); f && std::string(f) == "1")
    return cudaGraphExecUpdateErrorNotSupported;
  if (graph->kinds != held->kinds) return cudaGraphExecUpdateErrorTopologyChanged;
  held = std::make_shared<sy_emu::Graph>(*graph);
  return cudaGraphExecUpdateSuccess;
}
cudaError_t update_error(cudaGraphExecUpdateResult r) {
  if (r == cudaGraphExecUpdateSuccess) return cudaSuccess;
  return sy_emu::last_error = cudaErrorGraphExecUpdateFailure;
}
}  // namespace
#if CUDART_VERSION >= 12000
cudaError_t sy_emu_cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t g,
                                       cudaGraphExecUpdateResultInfo* info) {
  *info = {};
  info->result = graph_exec_update(exec, g);
  return update_error(info->result);
}
#else
cudaError_t sy_emu_cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t g,
                                       cudaGraphNode_t* error_node,
                                       cudaGraphExecUpdateResult* result) {
  *error_node = nullptr;
  *result = graph_exec_update(exec, g);
  return update_error(*result);
}
#endif
