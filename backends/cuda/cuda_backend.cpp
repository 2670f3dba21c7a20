// SPDX-License-Identifier: MIT
// CUDA device enumeration: cuda:i for each GPU the driver reports that this
// build has kernels for (a GPU older than every architecture compiled is left
// out, with the reason), or the reason there is none (no driver, a driver too
// old for this runtime, no device, no cuBLAS). Never throws. The CUDA runtime is linked statically
// and opens the driver (libcuda.so.1) itself, so this runs, and explains, on machines without any
// NVIDIA software.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <mutex>

#include "backend_api.h"
#include "cuda_arch.h"
#include "cuda_device.h"
#include "switchyard/backend/platform.h"
#include "switchyard/error.h"

namespace switchyard::cuda_impl {
namespace {

std::string version(int v) { return detail::cat(v / 1000, ".", (v % 1000) / 10); }

// Devices are torn down from an atexit handler registered after the CUDA
// runtime initialised (so it runs before the runtime's own teardown).
std::mutex g_mu;
std::vector<std::weak_ptr<CudaDevice>> g_devices;

void shutdown_at_exit() {
  std::lock_guard lock(g_mu);
  for (auto& w : g_devices)
    if (auto d = w.lock()) d->shutdown();
}

std::string no_driver_reason(cudaError_t e) {
  std::string why = detail::cat("no usable NVIDIA driver: cudaGetDeviceCount returned ",
                                cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  std::string err;
  if (void* h = platform::open_library("libcuda.so.1", &err, /*lazy=*/true)) {
    int drv = 0;
    if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0) {
      int rt = 0;
      (void)cudaRuntimeGetVersion(&rt);
      why += detail::cat("; the driver supports CUDA ", version(drv),
                         ", this build's runtime is CUDA ", version(rt));
    }
    platform::close_library(h);
  } else {
    why += detail::cat("; ", err);
  }
  return why;
}

}  // namespace

void register_exit_teardown() { std::atexit(shutdown_at_exit); }

BackendEntry enumerate() {
  BackendEntry e{"cuda", false, "", {}};
  if (const char* off = std::getenv("SWITCHYARD_CUDA_DISABLE"); off && std::string(off) == "1") {
    e.reason = "disabled by SWITCHYARD_CUDA_DISABLE=1";
    return e;
  }
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaErrorNoDevice) {
    (void)cudaGetLastError();
    const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
    e.reason = detail::cat("the NVIDIA driver reports no CUDA device",
                           vis ? detail::cat(" (CUDA_VISIBLE_DEVICES=", vis, ")") : std::string());
    return e;
  }
  if (err != cudaSuccess) {
    e.reason = no_driver_reason(err);
    (void)cudaGetLastError();
    return e;
  }
  int drv = 0, rt = 0;
  (void)cudaDriverGetVersion(&drv);
  (void)cudaRuntimeGetVersion(&rt);
  if (n == 0) {
    e.reason = detail::cat("the NVIDIA driver (CUDA ", version(drv), ") reports no CUDA device");
    return e;
  }
  std::string blas;
  try {
    const BlasApi& a = blas_api();
    blas = detail::cat(a.cublasLtGetVersion(), " (", a.lt_path, ")");
  } catch (const std::exception& x) {
    e.reason = x.what();
    return e;
  }
  const auto conv = conv_properties();  // the path a device will take (cuda_dnn.h)
  std::lock_guard lock(g_mu);
  std::string skipped;  // GPUs this build has no kernels for, and why
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (std::string why = unsupported_reason(p.major, p.minor, built_architectures());
        !why.empty()) {
      skipped +=
          detail::cat(skipped.empty() ? "" : "; ", "GPU ", i, " (", p.name, ") skipped: ", why);
      continue;
    }
    DeviceInfo info;
    info.backend = "cuda";
    info.index = int(e.devices.size());
    info.name = p.name;
    info.type = p.integrated ? DeviceType::integrated_gpu : DeviceType::discrete_gpu;
    info.memory_bytes = p.totalGlobalMem;
    info.properties = {
        {"compute_capability", detail::cat(p.major, ".", p.minor)},
        {"sms", std::to_string(p.multiProcessorCount)},
        {"l2", detail::cat(p.l2CacheSize >> 10, " KiB")},
        {"shared_memory_per_block", detail::cat(p.sharedMemPerBlockOptin >> 10, " KiB")},
        {"pci", detail::cat(p.pciDomainID, ":", p.pciBusID, ":", p.pciDeviceID)},
        {"memory", "staging ring (32 MiB pinned; device memory is not host-visible)"},
        {"driver", "CUDA " + version(drv)},
        {"runtime", "CUDA " + version(rt) + " (static)"},
        {"cublaslt", blas},
        {"graphs", graphs_enabled() ? "on" : "off"},
    };
    info.properties.insert(info.properties.end(), conv.begin(), conv.end());
    auto d = std::make_shared<CudaDevice>(std::move(info), i, int64_t(p.multiProcessorCount) * 32);
    g_devices.push_back(d);
    e.devices.push_back(std::move(d));
  }
  // With usable devices, `reason` still names the GPUs left out.
  e.reason = skipped;
  if (e.devices.empty()) {
    if (e.reason.empty()) e.reason = "cudaGetDeviceProperties failed for every device";
    return e;
  }
  register_exit_teardown();
  g_custom_cuda = make_custom_cuda();  // NVRTC and the driver API (cuda_custom.h)
  e.available = true;
  return e;
}

}  // namespace switchyard::cuda_impl

namespace switchyard::detail {
BackendEntry cuda_backend() { return cuda_impl::enumerate(); }
}  // namespace switchyard::detail
