// SPDX-License-Identifier: MIT
// Device base class bookkeeping, the backend registry and device selection.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "backend_api.h"
#include "graph.h"
#include "switchyard/custom.h"
#include "switchyard/error.h"
#include "switchyard/profile.h"
#include "switchyard/version.h"

namespace switchyard {

const char* version() { return SWITCHYARD_VERSION; }

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::integrated_gpu:
      return "integrated-gpu";
    case DeviceType::discrete_gpu:
      return "discrete-gpu";
    case DeviceType::virtual_gpu:
      return "virtual-gpu";
    case DeviceType::other:
      return "other";
  }
  return "?";
}

std::string DeviceInfo::str() const {
  return backend == "cpu" ? "cpu" : backend + ":" + std::to_string(index);
}

// The user's view: queued graph work (optimizer updates not yet submitted)
// runs too, as switchyard::synchronize(device) does.
void Device::synchronize() { switchyard::synchronize(*this); }

namespace {
int usable_devices(std::string_view backend) {
  for (const BackendEntry& e : backends())
    if (e.name == backend) return e.available ? int(e.devices.size()) : 0;
  return 0;
}
}  // namespace

bool cuda::is_available() { return usable_devices("cuda") > 0; }
int cuda::device_count() { return usable_devices("cuda"); }
bool vulkan::is_available() { return usable_devices("vulkan") > 0; }
int vulkan::device_count() { return usable_devices("vulkan"); }

// Counters are bumped from the DataLoader's worker too: relaxed atomics.
static uint64_t bump(uint64_t& c, uint64_t n) {
  return std::atomic_ref<uint64_t>(c).fetch_add(n, std::memory_order_relaxed) + n;
}

const char* fault_op_name(FaultOp op) {
  static const char* names[kNumFaultOps] = {"allocate", "upload",  "download",
                                            "copy",     "execute", "synchronize"};
  return names[int(op)];
}

void BackendDevice::inject_fault(FaultOp op, uint64_t nth, uint32_t times) {
  std::atomic_ref<uint32_t>(fault_repeats_[int(op)]).store(nth && times > 1 ? times - 1 : 0);
  std::atomic_ref<uint64_t>(fault_countdown_[int(op)]).store(nth);
  std::atomic_ref<bool>(fault_fired_[int(op)]).store(false);
}

bool BackendDevice::fault_fired(FaultOp op) const {
  return std::atomic_ref<const bool>(fault_fired_[int(op)]).load();
}

void BackendDevice::tune_begin() {
  throw Error(
      detail::cat("[tune] expected a device with kernel variants to time (vulkan), found ", str()));
}

std::vector<std::string> BackendDevice::tune_finish(int) {
  tune_begin();  // the same error
  return {};
}

void BackendDevice::prepare_custom(const KernelSpec& spec, int64_t) {
  throw Error(detail::cat("[custom kernel ", spec.name,
                          "] expected a device that runs custom "
                          "kernels, found ",
                          str(), " does not"));
}

void BackendDevice::maybe_fail(FaultOp op) {
  std::atomic_ref<uint64_t> left(fault_countdown_[int(op)]);
  uint64_t v = left.load(std::memory_order_relaxed);
  while (v > 0 && !left.compare_exchange_weak(v, v - 1)) {
  }
  if (v != 1) return;
  std::atomic_ref<bool>(fault_fired_[int(op)]).store(true);
  std::atomic_ref<uint32_t> again(fault_repeats_[int(op)]);
  if (uint32_t r = again.load(); r > 0 && again.compare_exchange_strong(r, r - 1))
    left.store(1);  // the next call fails too
  std::string msg = detail::cat("[", fault_op_name(op), "] injected fault on ", str(),
                                " (a test made this call fail)");
  if (op == FaultOp::allocate) throw OutOfMemory(msg);
  throw Error(msg);
}

Buffer BackendDevice::allocate(size_t bytes) {
  SY_CHECK(bytes > 0, "allocate", "expected a size > 0 bytes on ", str(), ", found 0");
  maybe_fail(FaultOp::allocate);
  Buffer b = allocate_impl(bytes);
  bump(counters_.buffer_allocations, 1);
  uint64_t now = bump(counters_.bytes_in_use, b.bytes);
  std::atomic_ref<uint64_t> peak(counters_.peak_bytes_in_use);
  for (uint64_t p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
  }
  return b;
}

Buffer BackendDevice::allocate_host(size_t bytes) {
  SY_CHECK(bytes > 0, "allocate_host", "expected a size > 0 bytes on ", str(), ", found 0");
  Buffer b = allocate_host_impl(bytes);
  if (!b) return b;
  bump(counters_.buffer_allocations, 1);
  uint64_t now = bump(counters_.bytes_in_use, b.bytes);
  std::atomic_ref<uint64_t> peak(counters_.peak_bytes_in_use);
  for (uint64_t p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
  }
  return b;
}

void BackendDevice::release(Buffer b) {
  if (!b) return;
  bump(counters_.buffer_releases, 1);
  bump(counters_.bytes_in_use, uint64_t(0) - b.bytes);
  release_impl(b);
}

void BackendDevice::upload(Buffer dst, size_t offset, const void* src, size_t bytes) {
  SY_CHECK(offset + bytes <= dst.bytes, "upload", "range [", offset, ", ", offset + bytes,
           ") exceeds the destination buffer of ", dst.bytes, " bytes on ", str());
  maybe_fail(FaultOp::upload);
  bump(counters_.bytes_uploaded, bytes);
  upload_impl(dst, offset, src, bytes);
}

void BackendDevice::download(Buffer src, size_t offset, void* dst, size_t bytes) {
  SY_CHECK(offset + bytes <= src.bytes, "download", "range [", offset, ", ", offset + bytes,
           ") exceeds the source buffer of ", src.bytes, " bytes on ", str());
  maybe_fail(FaultOp::download);
  bump(counters_.bytes_downloaded, bytes);
  try {
    download_impl(src, offset, dst, bytes);
  } catch (...) {
    // Chunks queued before the failure must not write `dst` later: the
    // caller sees the error and may free it.
    cancel_pending_downloads();
    throw;
  }
}

void BackendDevice::copy(Buffer src, size_t so, Buffer dst, size_t dof, size_t bytes) {
  SY_CHECK(so + bytes <= src.bytes && dof + bytes <= dst.bytes, "copy",
           "ranges exceed the buffers (", bytes, " bytes from offset ", so, " of ", src.bytes,
           " to offset ", dof, " of ", dst.bytes, ") on ", str());
  maybe_fail(FaultOp::copy);
  bump(counters_.bytes_copied, bytes);
  copy_impl(src, so, dst, dof, bytes);
}

void BackendDevice::execute(const Program& p, std::span<const Binding> bindings) {
  SY_CHECK(bindings.size() == p.num_slots, "execute", "expected ", p.num_slots, " bindings, found ",
           bindings.size());
  maybe_fail(FaultOp::execute);
  bump(counters_.submissions, 1);
  bump(counters_.kernel_launches, p.instrs.size());
  for (const Instr& i : p.instrs) {
    SY_CHECK(size_t(i.kernel) < size_t(kNumKernels), "execute", "unknown kernel id ",
             int(i.kernel));
    SY_CHECK(i.params.kernel() == i.kernel, kernel_name(i.kernel),
             "expected its own parameters, found ", kernel_name(i.params.kernel()), "'s");
    SY_CHECK(i.nargs <= kernel_num_args(i.kernel), kernel_name(i.kernel), "expected at most ",
             kernel_num_args(i.kernel), " buffer arguments, found ", int(i.nargs));
    SY_CHECK(supports(i.kernel), kernel_name(i.kernel), "not implemented on ", str());
    bump(counters_.launches_by_kernel[size_t(i.kernel)], 1);
    SY_CHECK(i.nmore == 0 || (kernel_has(i.kernel, kMultiTensor) &&
                              size_t(i.more) + i.nmore <= p.more_args.size()),
             kernel_name(i.kernel), "expected multi-tensor arguments only for a multi-tensor ",
             "kernel and within the Program's list, found ", i.nmore, " from ", i.more, " of ",
             p.more_args.size());
    if (kernel_has(i.kernel, kMultiTensor)) {
      const MultiLayout m = multi_layout(i.params);
      SY_CHECK(m.tensors >= 0 && i.nmore == uint64_t(m.per_tensor) * uint64_t(m.tensors),
               kernel_name(i.kernel), "expected ", m.per_tensor, " arguments per tensor, found ",
               i.nmore, " for ", m.tensors, " tensors");
    }
    uint64_t bytes = 0;
    auto span_of = [&](const Arg& a) { return a.bytes ? a.bytes : bindings[a.slot].buffer.bytes; };
    for (int a = 0; a < i.nargs; ++a) bytes += span_of(i.args[size_t(a)]);
    for (uint32_t a = 0; a < i.nmore; ++a) bytes += span_of(p.more_args[i.more + a]);
    bump(counters_.kernel_bytes, bytes);
    bump(counters_.kernel_bytes_by_kernel[size_t(i.kernel)], bytes);
    if (i.kernel == Kernel::gemm || i.kernel == Kernel::conv2d ||
        i.kernel == Kernel::conv2d_backward_input || i.kernel == Kernel::conv2d_backward_weight)
      bump(counters_.kernel_flops_by_kernel[size_t(i.kernel)], kernel_flops(i.params));
  }
  profile::Span span(profile::Track::submission, "execute", this);
  execute_impl(p, bindings);
}

namespace {

// Backends are registered at start-up (or by a plugin); lookups may come from
// any thread (the DataLoader's worker creates host tensors), hence the lock.
struct Registry {
  std::shared_mutex mu;
  std::vector<BackendEntry> backends;
  std::vector<std::pair<Device*, std::shared_ptr<detail::Context>>> contexts;
  Device* cpu_device = nullptr;
  std::once_flag gpu_probe;
};

std::unique_ptr<Registry> build_registry() {
  auto reg = std::make_unique<Registry>();
  reg->backends.push_back(detail::cpu_backend());
  reg->cpu_device = reg->backends.front().devices.front().get();
  // GPU backends in the build's order: devices() lists (and pin_memory()
  // picks) in it. Built ones are probed on first need (registry()).
  for (const detail::GpuBackend& g : detail::gpu_backends())
    reg->backends.push_back({g.name, false, g.probe ? "not probed yet" : g.why, {}});
  for (auto& b : reg->backends)
    for (auto& d : b.devices)
      reg->contexts.emplace_back(d.get(), std::make_shared<detail::Context>(d));
  return reg;
}

Registry& registry_unprobed() {
  static std::unique_ptr<Registry> r = build_registry();
  return *r;
}

// GPU backends are listed on first need (a program that only names "cpu"
// never loads a GPU driver). A backend that loads libraries tears its devices
// down from an atexit handler it registers after loading them, so that runs
// before those libraries' own static destructors.
Registry& registry() {
  Registry& r = registry_unprobed();
  std::call_once(r.gpu_probe, [&r] {
    auto install = [&r](BackendEntry entry) {
      std::unique_lock lock(r.mu);
      for (auto& d : entry.devices)
        r.contexts.emplace_back(d.get(), std::make_shared<detail::Context>(d));
      for (auto& b : r.backends)
        if (b.name == entry.name) {
          b = std::move(entry);
          break;
        }
    };
    auto probe = [](const char* name, BackendEntry (*fn)()) {
      try {
        return fn();
      } catch (const std::exception& e) {
        return BackendEntry{name, false, e.what(), {}};
      }
    };
    for (const detail::GpuBackend& g : detail::gpu_backends())
      if (g.probe) install(probe(g.name, g.probe));
  });
  return r;
}

}  // namespace

const std::vector<BackendEntry>& backends() { return registry().backends; }

void register_backend(BackendEntry entry) {
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  for (auto& b : r.backends)
    SY_CHECK(b.name != entry.name || !b.available, "register_backend",
             "expected a new backend "
             "name, found '",
             entry.name, "' already registered");
  std::erase_if(r.backends, [&](const BackendEntry& b) { return b.name == entry.name; });
  for (size_t i = 0; i < entry.devices.size(); ++i)
    SY_CHECK(entry.devices[i] && entry.devices[i]->info().backend == entry.name &&
                 entry.devices[i]->info().index == int(i),
             "register_backend", "expected device ", i, " of '", entry.name,
             "' to report backend '", entry.name, "' and index ", i);
  for (auto& d : entry.devices)
    r.contexts.emplace_back(d.get(), std::make_shared<detail::Context>(d));
  r.backends.push_back(std::move(entry));
}

std::vector<Device*> devices() {
  std::vector<Device*> out;
  std::shared_lock lock(registry().mu);
  for (auto& b : registry().backends)
    for (auto& d : b.devices) out.push_back(d.get());
  return out;
}

Device& cpu() { return *registry_unprobed().cpu_device; }

Device& device(std::string_view name) {
  if (name == "cpu") return cpu();
  // "backend:N": N in canonical form (no sign, no leading zeros, < 100000).
  std::string n(name);
  std::string backend = n;
  int index = 0;
  bool index_ok = true;
  std::string idx;
  if (auto colon = n.find(':'); colon != std::string::npos) {
    backend = n.substr(0, colon);
    idx = n.substr(colon + 1);
    index_ok = !idx.empty() && idx.size() < 6 && (idx == "0" || idx[0] != '0') &&
               std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (index_ok) index = std::stoi(idx);
  }
  // The CPU needs no GPU backend: naming it never loads a GPU driver.
  if (backend == "cpu" && index_ok) {
    SY_CHECK(index == 0, "device", "'", n, "' does not exist: the cpu backend has 1 device");
    return cpu();
  }
  std::vector<BackendEntry> snap;  // plugins may register meanwhile
  {
    std::shared_lock lock(registry().mu);
    snap = registry().backends;
  }
  auto available = [&] {
    std::string s;
    for (auto& b : snap)
      for (auto& d : b.devices) s += (s.empty() ? "" : ", ") + d->str();
    return s;
  };
  if (n ==
      "auto") {  // the first GPU of the built-in GPU backends, in their order; never a CPU driver
    for (const detail::GpuBackend& g : detail::gpu_backends())
      for (auto& b : snap)
        if (b.name == g.name)
          for (auto& d : b.devices)
            if (d->info().type != DeviceType::cpu) return *d;
    return cpu();
  }
  SY_CHECK(index_ok, "device",
           "expected a device index (0, 1, ... without leading zeros) after ':' in '", n,
           "', found '", idx, "'; available devices: ", available());
  for (auto& b : snap) {
    if (b.name != backend) continue;
    SY_CHECK(b.available, "device", "'", n, "' is not available: ", b.reason,
             "; available devices: ", available());
    SY_CHECK(index >= 0 && size_t(index) < b.devices.size(), "device", "'", n,
             "' does not exist: the ", b.name, " backend has ", b.devices.size(),
             " device(s); available devices: ", available());
    return *b.devices[index];
  }
  throw Error(detail::cat(
      "[device] unknown device '", n,
      "': expected cpu, vulkan[:N], cuda[:N] or auto; available devices: ", available()));
}

Device& default_device() {
  const char* env = std::getenv("SWITCHYARD_DEVICE");
  return device(env && *env ? env : "auto");
}

namespace detail {

Context& context_of(Device& d) {
  Registry& r = registry_unprobed();  // a device the caller holds is listed already
  std::shared_lock lock(r.mu);
  for (auto& [dev, ctx] : r.contexts)
    if (dev == &d) return *ctx;
  throw Error(cat("[device] ", d.str(), " is not a registered device"));
}

BufferPool::BufferPool(BackendDevice& d, bool host) : dev_(d), host_(host) {
  const char* e = std::getenv("SWITCHYARD_POISON");
  poison_ = !host && e && *e && std::string(e) != "0";
}

// All-ones bytes: a NaN as f32, -1 as i32. A kernel that leaves part of its
// output unwritten then fails every comparison in the tests.
void BufferPool::poison(Buffer b) {
  if (void* p = dev_.host_pointer(b)) {
    dev_.synchronize();
    std::memset(p, 0xff, b.bytes);
    return;
  }
  static const std::vector<unsigned char> ones(size_t(1) << 20, 0xff);
  for (size_t off = 0; off < b.bytes; off += ones.size())
    dev_.upload(b, off, ones.data(), std::min(ones.size(), b.bytes - off));
}

size_t BufferPool::round(size_t bytes) {
  if (bytes <= 512) return 512;
  if (bytes <= (1u << 20)) return (bytes + 511) & ~size_t(511);
  return (bytes + (1u << 16) - 1) & ~((size_t(1) << 16) - 1);
}

Buffer BufferPool::acquire(size_t bytes) {
  size_t r = round(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_.find(r);
  Buffer b;
  if (it != free_.end() && !it->second.empty()) {
    // The lowest handle of the size, not the last released: which buffer a
    // request gets depends on what is free, not on the order it was freed
    // in, so a training step binds the same buffers every step (a CUDA
    // graph replays, a Vulkan recording stays valid) instead of a
    // permutation of them that cycles from step to step.
    std::vector<Buffer>& v = it->second;
    auto low = std::min_element(v.begin(), v.end(), [](const Buffer& x, const Buffer& y) {
      return std::less<void*>()(x.handle, y.handle);
    });
    b = *low;
    *low = v.back();
    v.pop_back();
  } else {
    auto alloc = [&] { return host_ ? dev_.allocate_host(r) : dev_.allocate(r); };
    try {
      b = alloc();
    } catch (const OutOfMemory&) {
      // Give cached buffers back and try once more before failing.
      for (auto& [sz, v] : free_)
        for (auto& c : v) dev_.release(c);
      free_.clear();
      b = alloc();
    }
    if (!b) return b;  // no pinned memory on this device
  }
  if (poison_) {
    try {
      poison(b);
    } catch (...) {  // the buffer is not handed out: give it back, not lose it
      free_[b.bytes].push_back(b);
      throw;
    }
  }
  return b;
}

void BufferPool::release(Buffer b) {
  std::lock_guard<std::mutex> lock(mu_);
  free_[b.bytes].push_back(b);
}

void BufferPool::empty() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [sz, v] : free_)
    for (auto& b : v) dev_.release(b);
  free_.clear();
}

Storage::~Storage() {
  if (pin_ctx) {  // pinned host memory goes back to the device that lent it
    try {
      pin_ctx->host_pool.release(pin_buffer);
    } catch (...) {
      pin_ctx->device->release(pin_buffer);
    }
    return;
  }
  try {
    ctx->pool.release(buffer);
  } catch (...) {  // the cache could not grow: give the buffer back instead
    ctx->device->release(buffer);
  }
}

}  // namespace detail
}  // namespace switchyard
