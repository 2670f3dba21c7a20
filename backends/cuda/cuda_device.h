// SPDX-License-Identifier: MIT
// The CUDA device: one stream, a caching allocator over cudaMalloc, a pinned
// staging ring for transfers, pinned host buffers for pin_memory(), and
// CUDA-graph replay of repeated Programs.
#pragma once
#include <cuda_runtime_api.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_allocator.h"
#include "cuda_blas.h"
#include "cuda_custom.h"
#include "cuda_dispatch.h"
#include "cuda_dnn.h"
#include "cuda_kernels.h"
#include "serial_ring.h"
#include "switchyard/backend/device.h"
#include "timing.h"

namespace switchyard::cuda_impl {

class CudaDevice final : public BackendDevice {
 public:
  // max_blocks caps the grids of grid-stride kernels (SMs x 32 on a GPU).
  CudaDevice(DeviceInfo info, int ordinal, int64_t max_blocks);
  ~CudaDevice() override;

  void* host_pointer(Buffer b) override;
  // For pinned host buffers: waits for the last queued copy that used it (not
  // for the whole stream, so a DataLoader thread refilling a pinned batch
  // does not wait for the training step in flight).
  void wait_until_unused(Buffer b) override;
  bool supports(Kernel) const override { return true; }
  // cuBLASLt reads f32, f16 and (compute capability 8.0 and up, as
  // PyTorch's is_bf16_supported) bf16 operands, accumulating in f32.
  bool gemm_reads(DType t) const override {
    return t == DType::f32 || t == DType::f16 || (t == DType::bf16 && cc_major_ >= 8);
  }
  // Compiles the kernel's CUDA source with NVRTC for this device's
  // architecture and loads it (cuda_custom.h).
  void prepare_custom(const KernelSpec& spec, int64_t id) override;
  std::string custom_unavailable_reason() const override;
  // 16: a custom kernel may read its arguments as float4 (a view at another
  // offset is copied first).
  size_t custom_arg_alignment() const override { return 16; }
  uint32_t grid_stride_workgroups() override {
    return uint32_t(std::min<int64_t>(env_.max_blocks, 65535));
  }
  // Frees everything while the CUDA runtime is still up (from an atexit
  // handler registered after the runtime initialised); later calls fail.
  void shutdown() noexcept;
  const AllocatorStats& allocator_stats() const { return alloc_.stats(); }

 private:
  Buffer allocate_impl(size_t bytes) override;
  Buffer allocate_host_impl(size_t bytes) override;
  void release_impl(Buffer b) override;
  void upload_impl(Buffer dst, size_t offset, const void* src, size_t bytes) override;
  void download_impl(Buffer src, size_t offset, void* dst, size_t bytes) override;
  void copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t bytes) override;
  void execute_impl(const Program& p, std::span<const Binding> bindings) override;
  void synchronize_impl() override;
  void cancel_pending_downloads() noexcept override;

  // Instantiated graphs of one Program. `key` is everything baked into the
  // graph (argument addresses and scalar params), `shape` the kernels alone:
  // once a Program has its graphs, a run whose key is new but whose shape
  // matches is captured and applied to one of them with cudaGraphExecUpdate
  // (more binding sets than graphs), not instantiated anew. RNG offsets and
  // learning rates are not in the key: the graph reads them from `dyn`,
  // which the host rewrites before each run.
  struct Graph {
    uint64_t hash = 0, shape = 0;
    std::vector<uint64_t> key;
    cudaGraphExec_t exec = nullptr;
    uint64_t last_used = 0;
  };
  struct ProgramGraphs {
    std::vector<Graph> graphs;
    uint64_t recent[8] = {};  // shapes of recent runs: a repeat is worth capturing
    unsigned next_recent = 0;
    int failures = 0;       // captures or instantiations that failed
    bool disabled = false;  // failed 3 times: run eagerly from now on
    uint64_t last_run = 0;
    // The Philox offsets of its kRandomStream launches and the learning
    // rates of its kLearningRate ones (a float in the word's low half), in
    // device memory (one word each, in launch order), written before every
    // run.
    uint64_t* dyn = nullptr;
  };

  void ensure();  // creates the stream and helpers on first use
  void set_device() const;
  struct HostAlloc {
    size_t bytes = 0;
    cudaEvent_t last_use = nullptr;  // recorded after each queued copy using it
  };
  HostAlloc* host_alloc(const void* p);
  HostAlloc* host_alloc_containing(const void* p, size_t n);
  void note_host_use(HostAlloc* h);
  size_t ring_reserve(size_t n);
  // Copies n host bytes to device address dst through the staging ring,
  // in stream order (returns with src consumed); op names it in errors.
  void stage(void* dst, const void* src, size_t n, const char* op);
  void retire_segments_through(uint64_t serial);
  void record_segment();
  cudaEvent_t new_event();
  void enqueue(const Program& p);
  void launch_instr(const Program& p, size_t i);  // instruction i, resolved
  void run_graph(const Program& p, ProgramGraphs& pg, uint64_t hash, uint64_t shape);
  void launch_graph(Graph& g);
  void check_status();
  [[noreturn]] void throw_oom(const char* op, size_t bytes);
  // Profiling: while the profiler is on, Programs run eagerly with a timing
  // event before the first launch and after each, and copies between two;
  // synchronize() turns them into profiler events.
  struct ProfRec : TimingRecord {
    std::vector<cudaEvent_t> ev;
    int64_t host_ns = 0;  // profiler clock when it was enqueued
  };
  cudaEvent_t timing_event();
  const char* copy_kind(Buffer src, Buffer dst);
  // A record with its first event enqueued, already in prof_ (so an
  // exception before prof_end loses no event); nullptr when the profiler is
  // off. Valid until the next prof_begin.
  ProfRec* prof_begin();
  void prof_mark(ProfRec* r);  // enqueues the record's next event
  void prof_end(ProfRec* r, const char* name, uint64_t bytes);
  void host_transfer(const char* kind, size_t bytes, int64_t t0);  // a host memcpy, host-timed
  void harvest();

  const int ordinal_;
  int cc_major_ = 0, cc_minor_ = 0;  // compute capability (info's "compute_capability")
  std::mutex mu_;
  bool ready_ = false, down_ = false;
  cudaStream_t stream_ = nullptr;
  CachingAllocator alloc_;
  std::unordered_map<const void*, HostAlloc> host_allocs_;  // pinned host buffers
  // Staging ring (pinned), used in chunks of kChunk bytes. Each staged transfer has a serial and an
  // event; a region of the ring and a download's copy out of it wait for that serial.
  static constexpr size_t kRingBytes = size_t(32) << 20;
  char* ring_ = nullptr;
  SerialRing ring_regions_{kRingBytes};
  uint64_t next_serial_ = 1;
  std::deque<std::pair<uint64_t, cudaEvent_t>> ring_events_;
  DeferredCopies host_copies_;
  std::vector<cudaEvent_t> free_events_;
  // Bad-input reports from kernels: device words, read back through pinned.
  DeviceStatus* status_dev_ = nullptr;
  DeviceStatus* status_host_ = nullptr;
  bool status_dirty_ = false;
  LaunchEnv env_;
  Blas blas_;
  GemmFn gemm_;  // blas_.gemm, reached by launches through env_.gemm
  Dnn dnn_;      // cuDNN's convolutions, once a Program has one (and cuDNN loads)
  ConvFn conv_;  // dnn_.run, reached through env_.conv while dnn_ is ready
  bool conv_path_chosen_ = false;
  std::unordered_map<int64_t, void*> custom_fns_;  // loaded custom kernels, by registry id
  std::mutex custom_load_mu_;  // one load at a time (a kernel is loaded once: no module leaks)
  CustomLaunchFn custom_;      // reached by launches through env_.custom
  void* workspace_ = nullptr;
  void* scratch_ = nullptr;  // env_.scratch: split reductions' partials
  bool graphs_enabled_ = true;
  std::unordered_map<uint64_t, ProgramGraphs> programs_;
  std::vector<void*> ptrs_;    // resolved argument addresses, 5 per launch
  std::vector<uint64_t> key_;  // the current run's graph key
  // Multi-tensor launches: 2 words per argument of Program::more_args (a
  // launch's addresses, then their element counts), and their key words.
  std::vector<void*> more_ptrs_;
  std::vector<uint64_t> more_key_;
  // This run's device words (kRandomStream launches' Philox offsets,
  // kLearningRate launches' learning rates, in launch order), each launch's
  // index among them, and where a graph reads them (null: eager runs take
  // them from the params).
  std::vector<uint64_t> dyn_host_;   // this run's words for ProgramGraphs::dyn
  std::vector<uint32_t> dyn_index_;  // each launch's word there, or kNoWord
  static constexpr uint32_t kNoWord = UINT32_MAX;
  const uint64_t* dyn_slots_ = nullptr;
  uint64_t runs_ = 0;
  std::vector<ProfRec> prof_;               // waiting for synchronize()
  std::vector<cudaEvent_t> timing_events_;  // free, created with timing
  int64_t prof_end_ns_ = 0;                 // where the last harvested work ended
};

// False when SWITCHYARD_CUDA_GRAPHS=0: Programs run eagerly, never captured.
bool graphs_enabled();

// Every CUDA device of this machine, or why there are none (never throws).
BackendEntry enumerate();
// (Re-)registers the atexit handler that shuts every device down, so that it
// runs before the teardown of CUDA runtimes initialised so far.
void register_exit_teardown();

}  // namespace switchyard::cuda_impl
