// "cudaemu:0": a Device whose execute() runs the CUDA backend's own kernel
// sources (backends/cuda/k_*.cu and cuda_dispatch.cpp, compiled as C++ under
// SY_CUDA_EMULATION) on CPU threads, through the same dispatch and launch
// code as cuda:N. Memory is host memory. GEMM is cuBLAS's and is not
// emulated: the device says it does not support it. Used by test_cuda_emu
// (the conformance suite) so the kernels run in CI on machines without a GPU.
#include "emu_device.h"

#include <cstdlib>
#include <cstring>

#include "cuda_dispatch.h"
#include "switchyard/error.h"

namespace switchyard::cuda_impl {
namespace {

class EmuDevice final : public Device {
 public:
  EmuDevice() : Device(make_info()) {
    env_.max_blocks = 2;  // few blocks, so every grid-stride loop goes round
    env_.status = &status_;
  }
  bool supports(Kernel k) const override { return k != Kernel::gemm && k < Kernel::count_; }
  void* host_pointer(Buffer b) override { return b.handle; }

 private:
  static DeviceInfo make_info() {
    DeviceInfo i;
    i.backend = "cudaemu";
    i.name = "CUDA kernels emulated on CPU threads";
    i.type = DeviceType::other;
    return i;
  }
  Buffer allocate_impl(size_t bytes) override {
    size_t n = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, n);  // cudaMalloc's alignment
    if (!p) throw OutOfMemory(detail::cat("[allocate] out of host memory on cudaemu:0: expected ", bytes, " bytes"));
    return {p, bytes};
  }
  void release_impl(Buffer b) override { std::free(b.handle); }
  void upload_impl(Buffer dst, size_t off, const void* src, size_t n) override {
    std::memcpy(static_cast<char*>(dst.handle) + off, src, n);
  }
  void download_impl(Buffer src, size_t off, void* dst, size_t n) override {
    std::memcpy(dst, static_cast<char*>(src.handle) + off, n);
  }
  void copy_impl(Buffer src, size_t so, Buffer dst, size_t dof, size_t n) override {
    std::memmove(static_cast<char*>(dst.handle) + dof, static_cast<char*>(src.handle) + so, n);
  }
  void execute_impl(const Program& p, std::span<const Binding> bindings) override {
    GemmFn no_gemm = [](const KernelParams&, float*, const float*, const float*, const float*, const LaunchEnv&) {
      throw Error("[gemm] not implemented on cudaemu:0 (cuBLAS is not emulated)");
    };
    for (const Instr& ins : p.instrs) {
      void* ptrs[5] = {};
      for (int j = 0; j < ins.nargs; ++j) {
        const Binding& b = bindings[ins.args[j].slot];
        ptrs[j] = static_cast<char*>(b.buffer.handle) + b.offset + ins.args[j].offset;
      }
      dispatch(ins, ptrs, no_gemm, env_);
    }
    if (status_.code) {
      DeviceStatus st = status_;
      status_ = {};
      throw Error(detail::cat("[", kernel_name(Kernel(st.kernel)), "] expected labels in [0, ", st.bound,
                              "), found ", st.value, " at row ", st.row, " on cudaemu:0"));
    }
  }
  void synchronize_impl() override {}

  LaunchEnv env_;
  DeviceStatus status_{};
};

}  // namespace

Device& emulated_cuda_device() {
  static Device* d = [] {
    register_backend({"cudaemu", true, "", {std::make_shared<EmuDevice>()}});
    return &device("cudaemu:0");
  }();
  return *d;
}

}  // namespace switchyard::cuda_impl
