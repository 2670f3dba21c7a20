// SPDX-License-Identifier: MIT
// The CUDA runtime calls the backend makes, emulated on the host (see
// cudart_emu.cpp), under their own names: the macros below send the backend's
// calls here when it is compiled for tests/cuda_emu, so nothing collides with
// the real (static) CUDA runtime linked into the same test program.
//
// The emulated device's stream completes every operation when it is
// enqueued, except while it is being captured: then work is recorded into
// the graph and runs at each cudaGraphLaunch. Calls that CUDA refuses during
// a capture (synchronizing, allocating, event waits) fail here the same way.
// Device memory is host memory, limited to sy_emu::memory_limit bytes.
#pragma once
#include <cstddef>

#include "cuda_emu.h"

namespace sy_emu {
inline size_t memory_limit = size_t(1) << 30;  // "device" memory, for out-of-memory tests
}

// C linkage, as the toolkit's own declarations (which the macros below also
// rename, where a toolkit header includes cuda_runtime_api.h).
extern "C" {
cudaError_t sy_emu_cudaGetLastError();
const char* sy_emu_cudaGetErrorName(cudaError_t e);
const char* sy_emu_cudaGetErrorString(cudaError_t e);
cudaError_t sy_emu_cudaSetDevice(int device);
cudaError_t sy_emu_cudaMalloc(void** p, size_t bytes);
cudaError_t sy_emu_cudaFree(void* p);
cudaError_t sy_emu_cudaHostAlloc(void** p, size_t bytes, unsigned flags);
cudaError_t sy_emu_cudaFreeHost(void* p);
cudaError_t sy_emu_cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t sy_emu_cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t s);
cudaError_t sy_emu_cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s);
cudaError_t sy_emu_cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t sy_emu_cudaStreamDestroy(cudaStream_t s);
cudaError_t sy_emu_cudaStreamSynchronize(cudaStream_t s);
cudaError_t sy_emu_cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t sy_emu_cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t sy_emu_cudaEventSynchronize(cudaEvent_t e);
cudaError_t sy_emu_cudaEventQuery(cudaEvent_t e);
cudaError_t sy_emu_cudaEventDestroy(cudaEvent_t e);
cudaError_t sy_emu_cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t sy_emu_cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t sy_emu_cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g);
cudaError_t sy_emu_cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status);
cudaError_t sy_emu_cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t g,
                                                 unsigned long long flags);
cudaError_t sy_emu_cudaGraphDestroy(cudaGraph_t g);
cudaError_t sy_emu_cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t sy_emu_cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
#if CUDART_VERSION >= 12000
cudaError_t sy_emu_cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t g,
                                       cudaGraphExecUpdateResultInfo* info);
#else  // CUDA 11's form
cudaError_t sy_emu_cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t g,
                                       cudaGraphNode_t* error_node,
                                       cudaGraphExecUpdateResult* result);
#endif
}  // extern "C"

#define cudaGetLastError sy_emu_cudaGetLastError
#define cudaGetErrorName sy_emu_cudaGetErrorName
#define cudaGetErrorString sy_emu_cudaGetErrorString
#define cudaSetDevice sy_emu_cudaSetDevice
#define cudaMalloc sy_emu_cudaMalloc
#define cudaFree sy_emu_cudaFree
#define cudaHostAlloc sy_emu_cudaHostAlloc
#define cudaFreeHost sy_emu_cudaFreeHost
#define cudaMemGetInfo sy_emu_cudaMemGetInfo
#define cudaMemcpyAsync sy_emu_cudaMemcpyAsync
#define cudaMemsetAsync sy_emu_cudaMemsetAsync
#define cudaStreamCreateWithFlags sy_emu_cudaStreamCreateWithFlags
#define cudaStreamDestroy sy_emu_cudaStreamDestroy
#define cudaStreamSynchronize sy_emu_cudaStreamSynchronize
#define cudaEventCreateWithFlags sy_emu_cudaEventCreateWithFlags
#define cudaEventRecord sy_emu_cudaEventRecord
#define cudaEventSynchronize sy_emu_cudaEventSynchronize
#define cudaEventQuery sy_emu_cudaEventQuery
#define cudaEventDestroy sy_emu_cudaEventDestroy
#define cudaEventElapsedTime sy_emu_cudaEventElapsedTime
#define cudaStreamBeginCapture sy_emu_cudaStreamBeginCapture
#define cudaStreamEndCapture sy_emu_cudaStreamEndCapture
#define cudaStreamIsCapturing sy_emu_cudaStreamIsCapturing
#define cudaGraphInstantiateWithFlags sy_emu_cudaGraphInstantiateWithFlags
#define cudaGraphDestroy sy_emu_cudaGraphDestroy
#define cudaGraphExecDestroy sy_emu_cudaGraphExecDestroy
#define cudaGraphLaunch sy_emu_cudaGraphLaunch
#define cudaGraphExecUpdate sy_emu_cudaGraphExecUpdate
