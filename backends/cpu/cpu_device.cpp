// SPDX-License-Identifier: MIT
// The CPU device: host memory buffers and synchronous execution of Programs.

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <vector>

#include "backend_api.h"
#include "cpu_kernels.h"
#include "switchyard/backend/custom.h"
#include "switchyard/backend/platform.h"
#include "switchyard/error.h"
#include "switchyard/profile.h"
#include "thread_pool.h"

namespace switchyard::cpu_impl {
namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "CPU";
}

DeviceInfo make_info(const std::string& backend = "cpu", int index = 0) {
  DeviceInfo info;
  info.backend = backend;
  info.index = index;
  info.name = cpu_model();
  info.type = DeviceType::cpu;
  info.memory_bytes = platform::physical_memory_bytes();
  std::string threads;
  try {
    // The pool's threads; when they outnumber the CPUs the process may run
    // on, how many a parallel region uses at most.
    const ThreadPool& p = pool();
    threads = std::to_string(p.size());
    if (p.active() < p.size())
      threads += detail::cat(" (", p.active(), " at a time: ", available_cpus(), " CPUs)");
    threads += detail::cat(", cores=", physical_cores(), "/", available_cpus(), " CPUs");
  } catch (const Error& e) {  // a bad SWITCHYARD_CPU_THREADS: thrown again by the first kernel
    threads = "invalid SWITCHYARD_CPU_THREADS";
  }
  info.properties = {
      {"threads", threads},
      {"gemm", gemm_library()},
      {"threads_by_work",
       detail::cat("a thread per ", kElementGrain, " elements (elementwise, rows, pooling); GEMMs ",
                   "below ", kGemmSerialWork, " multiply-adds on one, larger ones split")}};
  return info;
}

class CpuDevice final : public BackendDevice {
 public:
  CpuDevice() : BackendDevice(make_info()) {}
  explicit CpuDevice(DeviceInfo info) : BackendDevice(std::move(info)) {}

  void* host_pointer(Buffer b) override { return b.handle; }
  bool supports(Kernel) const override { return true; }
  bool gemm_reads(DType) const override { return true; }  // widened in blocks, then sgemm
  // Rounded from an f32 block.
  bool gemm_writes(const GemmParams&) const override { return true; }
  std::string custom_unavailable_reason() const override { return ""; }
  void prepare_custom(const KernelSpec& spec, int64_t) override {
    SY_CHECK(bool(spec.cpu), detail::cat("custom kernel ", spec.name).c_str(),
             "expected a CPU callable (KernelSpec::cpu) to run on ", str(), ", found none");
  }

 private:
  Buffer allocate_impl(size_t bytes) override {
    size_t rounded = (bytes + 63) & ~size_t(63);
    void* p = platform::aligned_alloc(64, rounded);
    if (!p)
      throw OutOfMemory(detail::cat("[allocate] cannot allocate ", bytes,
                                    " bytes of host memory on cpu: expected ", bytes,
                                    " bytes free, found the allocator exhausted"));
    return {p, bytes};
  }
  void release_impl(Buffer b) override { platform::aligned_free(b.handle); }
  // The CPU's "device time" is its own clock around each memcpy and kernel
  // (execution is synchronous).
  void timed(profile::Track t, const char* name, size_t bytes, int64_t t0) {
    profile::record_since(t, *this, name, t0, bytes, true);
  }
  void upload_impl(Buffer dst, size_t off, const void* src, size_t n) override {
    int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
    std::memcpy(static_cast<char*>(dst.handle) + off, src, n);
    if (t0 >= 0) timed(profile::Track::transfer, "upload (memcpy)", n, t0);
  }
  void download_impl(Buffer src, size_t off, void* dst, size_t n) override {
    int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
    std::memcpy(dst, static_cast<const char*>(src.handle) + off, n);
    if (t0 >= 0) timed(profile::Track::transfer, "download (memcpy)", n, t0);
  }
  void copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t n) override {
    int64_t t0 = profile::enabled() ? profile::now_ns() : -1;
    std::memmove(static_cast<char*>(dst.handle) + dof, static_cast<const char*>(src.handle) + so,
                 n);
    if (t0 >= 0) timed(profile::Track::transfer, "copy", n, t0);
  }
  void execute_impl(const Program& prog, std::span<const Binding> bind) override {
    void* ptrs[5];
    bool prof = profile::enabled();
    auto at = [&](const Arg& a) {
      const Binding& b = bind[a.slot];
      return static_cast<void*>(static_cast<char*>(b.buffer.handle) + b.offset + a.offset);
    };
    for (const Instr& ins : prog.instrs) {
      for (int i = 0; i < ins.nargs; ++i) ptrs[i] = at(ins.args[i]);
      int64_t t0 = prof ? profile::now_ns() : 0;
      if (ins.kernel == Kernel::custom) {
        run_custom(ins, ptrs);
      } else if (kernel_has(ins.kernel, kMultiTensor)) {
        std::vector<void*> more(ins.nmore);
        std::vector<uint64_t> bytes(ins.nmore);
        for (uint32_t i = 0; i < ins.nmore; ++i) {
          const Arg& a = prog.more_args[ins.more + i];
          more[i] = at(a);
          bytes[i] = a.bytes;
        }
        run_multi_kernel(ins.params, more.data(), bytes.data());
      } else {
        run_kernel(ins.params, ptrs);
      }
      if (prof) timed(profile::Track::kernel, custom_impl::display_name(ins.params).c_str(), 0, t0);
    }
  }
  void synchronize_impl() override {}
  // The user's callable, given the arguments' pointers and sizes.
  static void run_custom(const Instr& ins, void* const* ptrs) {
    const auto p = params<Kernel::custom>(ins.params);
    const KernelSpec& s = custom_impl::spec(p.id);
    alignas(16) unsigned char bytes[kCustomParamBytes];  // read as the user's struct
    custom_impl::param_bytes(p, bytes);
    const size_t nout = size_t(p.outputs), nin = size_t(ins.nargs) - nout;
    const void* in[kCustomMaxArgs];
    size_t sizes[kCustomMaxArgs];
    for (int i = 0; i < ins.nargs; ++i) sizes[i] = ins.args[i].bytes;
    for (size_t i = 0; i < nin; ++i) in[i] = ptrs[nout + i];
    CpuKernelArgs a;
    a.outputs = std::span<void* const>(ptrs, nout);
    a.inputs = std::span<const void* const>(in, nin);
    a.output_bytes = std::span<const size_t>(sizes, nout);
    a.input_bytes = std::span<const size_t>(sizes + nout, nin);
    a.params = s.params_bytes ? bytes : nullptr;
    s.cpu(a);
  }
};

}  // namespace
}  // namespace switchyard::cpu_impl

namespace switchyard::detail {
BackendEntry cpu_backend() { return {"cpu", true, "", {std::make_shared<cpu_impl::CpuDevice>()}}; }
std::shared_ptr<Device> make_cpu_device(const std::string& backend, int index) {
  return std::make_shared<cpu_impl::CpuDevice>(cpu_impl::make_info(backend, index));
}
}  // namespace switchyard::detail
