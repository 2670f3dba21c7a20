// SPDX-License-Identifier: MIT
// Custom CUDA kernels: NVRTC and the driver API, both reached at run time
// (see cuda_custom.h).
#include "cuda_custom.h"

#include <cuda.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "switchyard/backend/custom.h"
#include "switchyard/backend/platform.h"
#include "switchyard/error.h"

namespace switchyard::cuda_impl {
namespace {

#define SY_STR2(x) #x
#define SY_STR(x) SY_STR2(x)

struct Nvrtc {
  std::string why, library, version;
  decltype(&nvrtcVersion) version_fn = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) ptx = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;  // optional: PTX only without them
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  std::vector<int> archs;  // the architectures it compiles for (nvrtcGetSupportedArchs)
};

const Nvrtc& nvrtc() {
  static const Nvrtc n = [] {
    Nvrtc r;
    // NVRTC of the toolkit this build was made with (its major version).
    const std::string major = std::to_string(CUDART_VERSION / 1000);
    std::vector<std::string> names;
#if defined(_WIN32)
    names = {"nvrtc64_" + major + "0_0.dll"};
#else
    names = {"libnvrtc.so." + major};
#ifdef SWITCHYARD_CUDA_TOOLKIT_LIB
    names.push_back(std::string(SWITCHYARD_CUDA_TOOLKIT_LIB) + "/libnvrtc.so." + major);
#endif
#endif
    void* lib = nullptr;
    std::string errors;
    for (const std::string& name : names) {
      std::string err;
      if ((lib = platform::open_library(name.c_str(), &err))) {
        r.library = name;
        break;
      }
      errors += (errors.empty() ? "" : "; ") + err;
    }
    if (!lib) {
      r.why = "NVRTC could not be opened (" + errors + "); it ships with the CUDA toolkit " +
              major + " (Debian/Ubuntu: the cuda-nvrtc package)";
      return r;
    }
    std::string missing;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          platform::library_symbol(lib, name));
      if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
    };
    get(r.version_fn, "nvrtcVersion");
    get(r.create, "nvrtcCreateProgram");
    get(r.destroy, "nvrtcDestroyProgram");
    get(r.compile, "nvrtcCompileProgram");
    get(r.ptx_size, "nvrtcGetPTXSize");
    get(r.ptx, "nvrtcGetPTX");
    get(r.log_size, "nvrtcGetProgramLogSize");
    get(r.log, "nvrtcGetProgramLog");
    get(r.error_string, "nvrtcGetErrorString");
    if (!missing.empty()) {
      r.why = r.library + " lacks " + missing;
      return r;
    }
    r.cubin_size = reinterpret_cast<decltype(r.cubin_size)>(
        platform::library_symbol(lib, "nvrtcGetCUBINSize"));
    r.cubin = reinterpret_cast<decltype(r.cubin)>(platform::library_symbol(lib, "nvrtcGetCUBIN"));
    using NumArchs = nvrtcResult (*)(int*);
    using Archs = nvrtcResult (*)(int*);
    auto num =
        reinterpret_cast<NumArchs>(platform::library_symbol(lib, "nvrtcGetNumSupportedArchs"));
    auto list = reinterpret_cast<Archs>(platform::library_symbol(lib, "nvrtcGetSupportedArchs"));
    int count = 0;
    if (num && list && num(&count) == NVRTC_SUCCESS && count > 0) {
      r.archs.resize(size_t(count));
      if (list(r.archs.data()) != NVRTC_SUCCESS) r.archs.clear();
    }
    int a = 0, b = 0;
    r.version_fn(&a, &b);
    r.version = "nvrtc " + std::to_string(a) + "." + std::to_string(b);
    return r;
  }();
  return n;
}

// The driver API entries custom kernels use, from the driver cudart opened.
struct Driver {
  std::string why;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*func_get_attribute)(int*, CUfunction_attribute, CUfunction) = nullptr;
  // Optional (drivers of CUDA 12.4 and later): the entry's parameter layout.
  CUresult (*func_get_param_info)(CUfunction, size_t, size_t*, size_t*) = nullptr;
};

const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    auto get = [&](auto& fn, const char* name, unsigned version = 12000, bool optional = false) {
      void* p = nullptr;
#if CUDART_VERSION >= 12050
      cudaDriverEntryPointQueryResult q{};
      const bool ok = cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q) ==
                          cudaSuccess &&
                      q == cudaDriverEntryPointSuccess;
#elif CUDART_VERSION >= 12000
      cudaDriverEntryPointQueryResult q{};
      const bool ok = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &q) == cudaSuccess &&
                      q == cudaDriverEntryPointSuccess;
#else
      const bool ok = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault) == cudaSuccess;
#endif
      (void)version;
      if (!ok || !p) {
        (void)cudaGetLastError();
        if (optional) return;
        r.why += std::string(r.why.empty() ? "" : ", ") + name;
        return;
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get(r.module_load_data, "cuModuleLoadData");
    get(r.module_get_function, "cuModuleGetFunction");
    get(r.launch_kernel, "cuLaunchKernel");
    get(r.error_string, "cuGetErrorString");
    get(r.module_unload, "cuModuleUnload");
    get(r.func_get_attribute, "cuFuncGetAttribute");
    get(r.func_get_param_info, "cuFuncGetParamInfo", 12040, /*optional=*/true);
    if (!r.why.empty()) r.why = "the CUDA driver does not give " + r.why;
    return r;
  }();
  return d;
}

std::string driver_error(CUresult e) {
  const char* s = nullptr;
  if (driver().error_string) driver().error_string(e, &s);
  return detail::cat(s ? s : "unknown error", " (", int(e), ")");
}

class CustomCudaImpl final : public CustomCuda {
 public:
  void* load(const KernelSpec& s, int major, int minor) override {
    const std::string what = "custom kernel " + s.name;
    const Driver& d = driver();
    SY_CHECK(d.why.empty(), what.c_str(), "expected the CUDA driver API to load it, found ", d.why);
    const Nvrtc& n = nvrtc();
    const CudaTarget t = choose_cuda_target(n.archs, bool(n.cubin && n.cubin_size), major, minor);
    SY_CHECK(t.arch > 0, what.c_str(), "expected NVRTC to compile for compute capability ", major,
             ".", minor, " or an earlier one, found its oldest is ",
             n.archs.empty() ? 0 : n.archs.front() / 10, ".",
             n.archs.empty() ? 0 : n.archs.front() % 10);
    const std::string code = nvrtc_compile(s, t.arch, t.cubin);
    CUmodule mod = nullptr;
    if (CUresult e = d.module_load_data(&mod, code.c_str()); e != CUDA_SUCCESS)
      throw Error(detail::cat("[", what,
                              "] expected cuModuleLoadData to load its compiled code, found ",
                              driver_error(e)));
    try {
      CUfunction fn = nullptr;
      if (CUresult e = d.module_get_function(&fn, mod, s.cuda_entry.c_str()); e != CUDA_SUCCESS)
        throw Error(detail::cat("[", what, "] expected an extern \"C\" __global__ entry '",
                                s.cuda_entry, "' in its CUDA source, found ", driver_error(e)));
      check_params(s, fn, t.cubin ? std::string() : code);
      // Registers limit the block below the device's 1024 threads: said
      // here, not as a failed launch inside a captured graph.
      int max_threads = 0, regs = 0;
      if (d.func_get_attribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn) ==
              CUDA_SUCCESS &&
          d.func_get_attribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn) == CUDA_SUCCESS) {
        const uint64_t block = uint64_t(s.workgroup[0]) * s.workgroup[1] * s.workgroup[2];
        if (max_threads > 0 && block > uint64_t(max_threads))
          throw DeviceLimit(detail::cat("[", what, "] expected a block of at most ", max_threads,
                                        " threads (its entry uses ", regs,
                                        " registers a thread), found ", s.workgroup[0], "x",
                                        s.workgroup[1], "x", s.workgroup[2]));
      }
      return fn;  // the module stays loaded for the process, as the kernel lives
    } catch (...) {
      d.module_unload(mod);
      throw;
    }
  }

  // The entry's parameters against the launch's: one pointer per argument,
  // then the parameter struct of params_bytes. From the driver (12.4+),
  // else from the PTX when that is what was loaded.
  static void check_params(const KernelSpec& s, CUfunction fn, const std::string& ptx) {
    std::vector<size_t> sizes;
    bool known = false;
    if (const auto info = driver().func_get_param_info) {
      CUresult e = CUDA_SUCCESS;
      for (size_t j = 0; j <= kCustomMaxArgs + 1; ++j) {
        size_t off = 0, size = 0;
        if ((e = info(fn, j, &off, &size)) != CUDA_SUCCESS) break;
        sizes.push_back(size);
      }
      // Past the last parameter it answers INVALID_VALUE (none: index 0);
      // another answer says nothing about the layout.
      known = e == CUDA_ERROR_INVALID_VALUE;
    }
    if (!known && !ptx.empty()) {
      sizes = ptx_param_sizes(ptx, s.cuda_entry);
      known = !sizes.empty() || ptx.find(".entry " + s.cuda_entry + "()") != std::string::npos;
    }
    if (!known) return;  // a cubin on an older driver, or PTX this parser does not read
    check_cuda_params(s, sizes);
  }

  std::string unavailable_reason() const override {
    if (std::string why = nvrtc_unavailable_reason(); !why.empty()) return why;
    return driver().why;
  }

  void launch(void* fn, const KernelSpec& s, const CustomParams& p, void* const* args, int nargs,
              cudaStream_t stream) override {
    alignas(16) unsigned char bytes[kCustomParamBytes];
    custom_impl::param_bytes(p, bytes);
    void* ptrs[kCustomMaxArgs];
    void* kp[kCustomMaxArgs + 1] = {};
    int n = 0;
    for (int j = 0; j < nargs; ++j) ptrs[j] = args[j], kp[n++] = &ptrs[j];
    if (s.params_bytes) kp[n++] = bytes;
    CUresult e = driver().launch_kernel(static_cast<CUfunction>(fn), unsigned(p.grid[0]),
                                        unsigned(p.grid[1]), unsigned(p.grid[2]), s.workgroup[0],
                                        s.workgroup[1], s.workgroup[2], 0,
                                        static_cast<CUstream>(stream), kp, nullptr);
    if (e != CUDA_SUCCESS)
      throw Error(detail::cat("[custom kernel ", s.name,
                              "] expected cuLaunchKernel to launch it, found ", driver_error(e)));
  }
};

}  // namespace

CustomCuda* make_custom_cuda() {
  static CustomCudaImpl impl;
  return &impl;
}

std::string nvrtc_unavailable_reason() { return nvrtc().why; }

std::vector<int> nvrtc_architectures() { return nvrtc().archs; }

CudaTarget choose_cuda_target(const std::vector<int>& known, bool cubins, int major, int minor) {
  // A cubin for the device's architecture when NVRTC knows it (no PTX for
  // the driver to compile, which a driver older than NVRTC could not
  // read); else PTX for the newest architecture it knows below (a GPU newer
  // than the toolkit), which the driver compiles on load.
  const int arch = major * 10 + minor;
  if (cubins && std::find(known.begin(), known.end(), arch) != known.end()) return {arch, true};
  int best = known.empty() ? arch : 0;
  for (int k : known)
    if (k <= arch) best = std::max(best, k);
  return {best, false};
}

std::vector<size_t> ptx_param_sizes(const std::string& ptx, const std::string& entry) {
  std::vector<size_t> sizes;
  const std::string head = ".entry " + entry + "(";
  size_t at = ptx.find(head);
  if (at == std::string::npos) return sizes;
  const size_t end = ptx.find(')', at);
  at += head.size();
  while (true) {
    const size_t p = ptx.find(".param", at);
    if (p == std::string::npos || p > end) break;
    const size_t stop = std::min(ptx.find_first_of(",)", p), end);
    const std::string decl = ptx.substr(p, stop - p);
    size_t bytes = 0;
    if (size_t lb = decl.find('['); lb != std::string::npos) {
      bytes = size_t(std::strtoull(decl.c_str() + lb + 1, nullptr, 10));
    } else {
      // .param .u64 name: the width in the type's name (.u8 .. .f64, .b64)
      for (const char* w : {"64", "32", "16", "8"})
        if (decl.find(std::string(".u") + w) != std::string::npos ||
            decl.find(std::string(".s") + w) != std::string::npos ||
            decl.find(std::string(".b") + w) != std::string::npos ||
            decl.find(std::string(".f") + w) != std::string::npos) {
          bytes = size_t(std::atoi(w)) / 8;
          break;
        }
    }
    sizes.push_back(bytes);
    at = stop;
  }
  return sizes;
}

void check_cuda_params(const KernelSpec& s, const std::vector<size_t>& sizes) {
  const std::string what = "custom kernel " + s.name;
  const size_t nargs = s.outputs.size() + s.inputs.size();
  const size_t want = nargs + (s.params_bytes ? 1 : 0);
  std::string found;
  for (size_t z : sizes) found += (found.empty() ? "" : ", ") + std::to_string(z);
  bool ok = sizes.size() == want;
  for (size_t j = 0; ok && j < nargs; ++j) ok = sizes[j] == sizeof(void*);
  if (ok && s.params_bytes) ok = sizes[nargs] == s.params_bytes;
  SY_CHECK(ok, what.c_str(), "expected its entry '", s.cuda_entry, "' to take ", nargs,
           " pointers (outputs, then inputs)",
           s.params_bytes ? detail::cat(" and a parameter struct of ", s.params_bytes, " bytes")
                          : std::string(),
           ", found ", sizes.size(), " parameters of ", found.empty() ? "no" : found, " bytes");
}

std::string cuda_prelude(const KernelSpec& s) {
  return detail::cat("#define SY_WG_X ", s.workgroup[0], "\n#define SY_WG_Y ", s.workgroup[1],
                     "\n#define SY_WG_Z ", s.workgroup[2], "\n#line 1 \"", s.name, ".cu\"\n");
}

std::string nvrtc_ptx(const KernelSpec& s, int arch) { return nvrtc_compile(s, arch, false); }

std::string nvrtc_compile(const KernelSpec& s, int arch, bool cubin) {
  const std::string what = "custom kernel " + s.name;
  const Nvrtc& n = nvrtc();
  SY_CHECK(n.why.empty(), what.c_str(), "expected NVRTC to compile its CUDA source, found ", n.why);
  SY_CHECK(!s.cuda.empty(), what.c_str(), "expected CUDA source (KernelSpec::cuda), found none");
  const std::string source = cuda_prelude(s) + s.cuda;
  SY_CHECK(!cubin || (n.cubin && n.cubin_size), what.c_str(),
           "expected NVRTC to write cubins, found ", n.library, " does not");
  const std::string target = (cubin ? "sm_" : "compute_") + std::to_string(arch);
  const std::vector<std::string> opts = {"--gpu-architecture=" + target, "--std=c++17",
                                         "-lineinfo"};
  std::string key = "cuda\n" + n.version + "\n";
  for (const auto& o : opts) key += o + " ";
  key += "\n" + source;
  return custom_impl::cached_compile(
      s.name, (target + (cubin ? ".cubin" : ".ptx")).c_str(), key,
      [&] {
        nvrtcProgram prog = nullptr;
        const std::string file = s.name + ".cu";
        nvrtcResult r = n.create(&prog, source.c_str(), file.c_str(), 0, nullptr, nullptr);
        SY_CHECK(r == NVRTC_SUCCESS, what.c_str(), "expected nvrtcCreateProgram to succeed, found ",
                 n.error_string(r));
        std::vector<const char*> o;
        for (const auto& x : opts) o.push_back(x.c_str());
        r = n.compile(prog, int(o.size()), o.data());
        size_t len = 0;
        n.log_size(prog, &len);
        std::string log(len, '\0');
        if (len) n.log(prog, log.data());
        while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
        std::string out;
        if (r == NVRTC_SUCCESS && cubin) {
          n.cubin_size(prog, &len);
          out.assign(len, '\0');
          n.cubin(prog, out.data());
        } else if (r == NVRTC_SUCCESS) {
          n.ptx_size(prog, &len);
          out.assign(len, '\0');
          n.ptx(prog, out.data());
          while (!out.empty() && out.back() == '\0') out.pop_back();
        }
        n.destroy(&prog);
        if (r != NVRTC_SUCCESS)
          throw Error(detail::cat("[", what, "] expected CUDA source that compiles (NVRTC, ",
                                  target, "), found errors (lines of its source):\n", log));
        return out;
      },
      [cubin](const std::string& c) {
        return cubin ? c.rfind(
                           "\x7f"
                           "ELF",
                           0) == 0
                     : c.find(".entry") != std::string::npos;
      });
}

}  // namespace switchyard::cuda_impl
