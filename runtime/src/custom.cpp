// SPDX-License-Identifier: MIT
// Custom kernels (switchyard/custom.h): the registry, launches as graph
// nodes with their autograd record, the compile cache the backends share
// (switchyard/backend/custom.h) and the public gradient check.
#include "switchyard/custom.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <unordered_map>

#include "graph.h"
#include "ops_internal.h"
#include "switchyard/backend/custom.h"
#include "switchyard/backend/files.h"
#include "switchyard/error.h"

namespace switchyard {
using namespace detail;

namespace {

// Kernels live for the process: a Program recorded with one names it by id.
struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<const KernelSpec>> specs;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: launches may come from exit handlers
  return *r;
}

struct Stats {
  std::atomic<uint64_t> compiles{0}, memory_hits{0}, disk_hits{0}, disk_writes{0}, corrupt{0};
  std::atomic<int64_t> compile_ns{0};
};
Stats& stats() {
  static Stats* s = new Stats;
  return *s;
}

// Output arguments start at multiples of this: every backend's storage
// offset alignment (Vulkan's minStorageBufferOffsetAlignment is at most 256).
constexpr uint64_t kArgAlign = 256;

bool identifier(const std::string& s) {
  if (s.empty() || s.size() > 64 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

std::string op_name(const KernelSpec& s) { return "custom kernel " + s.name; }

std::string code_list(const KernelSpec& s) {
  std::string r;
  auto add = [&](bool has, const char* what) {
    if (has) r += std::string(r.empty() ? "" : ", ") + what;
  };
  add(!s.glsl.empty(), "GLSL (vulkan)");
  add(!s.cuda.empty(), "CUDA (cuda)");
  add(bool(s.cpu), "a CPU callable (cpu)");
  return r.empty() ? "none" : r;
}

uint64_t fnv1a(std::string_view a, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : a) h = (h ^ c) * 1099511628211ull;
  return h;
}

void put64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
uint64_t get64(const std::string& s, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}

// Cache file: magic, key length, payload length, hash of key and payload,
// then the key and the payload.
constexpr char kMagic[8] = {'S', 'Y', 'C', 'K', 'E', 'R', '0', '1'};
constexpr size_t kHeader = 8 + 8 + 8 + 8;
constexpr size_t kMaxEntryBytes = size_t(64) << 20;

std::string envelope(const std::string& key, const std::string& payload) {
  std::string f(kMagic, 8);
  put64(f, key.size());
  put64(f, payload.size());
  put64(f, fnv1a(payload, fnv1a(key)));
  return f + key + payload;
}

// The payload of a cache file made for `key`, or nullopt when it is not one.
std::optional<std::string> open_envelope(const std::string& f, const std::string& key) {
  if (f.size() < kHeader || std::memcmp(f.data(), kMagic, 8) != 0) return std::nullopt;
  const uint64_t nk = get64(f, 8), np = get64(f, 16);
  if (nk != key.size() || nk > f.size() - kHeader || np != f.size() - kHeader - nk)
    return std::nullopt;
  std::string_view k(f.data() + kHeader, nk), p(f.data() + kHeader + nk, np);
  if (k != key || fnv1a(p, fnv1a(k)) != get64(f, 24)) return std::nullopt;
  return std::string(p);
}

}  // namespace

Grid Grid::cover(int64_t items, uint32_t size, uint32_t cap) {
  const uint64_t n = uint64_t(std::max<int64_t>(items, 0)), s = std::max<uint32_t>(size, 1);
  return {uint32_t(std::clamp<uint64_t>((n + s - 1) / s, 1, std::max<uint32_t>(cap, 1))), 1, 1};
}

CustomKernel::CustomKernel(KernelSpec s) {
  const char* op = "CustomKernel";
  SY_CHECK(identifier(s.name), op,
           "expected a name of letters, digits and '_' (at most 64), found '", s.name, "'");
  const std::string what = op_name(s);
  const char* k = what.c_str();
  SY_CHECK(!s.outputs.empty() && !s.inputs.empty(), k,
           "expected at least one input and one output, found ", s.inputs.size(), " and ",
           s.outputs.size());
  SY_CHECK(s.inputs.size() + s.outputs.size() <= kCustomMaxArgs, k, "expected at most ",
           kCustomMaxArgs, " tensor arguments (outputs and inputs), found ",
           s.inputs.size() + s.outputs.size());
  SY_CHECK(s.params_bytes <= kCustomParamBytes, k, "expected at most ", kCustomParamBytes,
           " bytes of parameters, found ", s.params_bytes);
  SY_CHECK(!s.glsl.empty() || !s.cuda.empty() || s.cpu, k,
           "expected GLSL, CUDA or a CPU callable, found none");
  uint64_t inv = 1;
  for (uint32_t w : s.workgroup) inv *= w;
  SY_CHECK(inv >= 1 && inv <= 1024 && s.workgroup[2] <= 64, k,
           "expected a workgroup of 1 to 1024 invocations (at most 64 along z), found ",
           s.workgroup[0], "x", s.workgroup[1], "x", s.workgroup[2]);
  if (s.cuda_entry.empty()) s.cuda_entry = s.name;
  SY_CHECK(s.cuda.empty() || identifier(s.cuda_entry), k, "expected a CUDA entry name, found '",
           s.cuda_entry, "'");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  id_ = int64_t(r.specs.size());
  r.specs.push_back(std::make_shared<const KernelSpec>(std::move(s)));
}

const KernelSpec& CustomKernel::spec() const { return custom_impl::spec(id_); }

bool CustomKernel::has_code_for(const Device& d) const {
  const KernelSpec& s = spec();
  const std::string& b = d.info().backend;
  if (b == "vulkan") return !s.glsl.empty();
  if (b == "cuda") return !s.cuda.empty();
  if (b == "cpu") return bool(s.cpu);
  return true;  // another backend (a plugin) says in prepare_custom
}

void CustomKernel::compile(Device& d) const {
  const KernelSpec& s = spec();
  SY_CHECK(has_code_for(d), op_name(s).c_str(), "expected code for ", d.str(), " (backend ",
           d.info().backend, "), found code for: ", code_list(s));
  backend_of(d).prepare_custom(s, id_);
}

namespace {

struct Saved {
  int64_t id;
  std::vector<Tensor> inputs, outputs;
  std::vector<unsigned char> params;
};

std::vector<Tensor> run_backward(const Saved& sv, size_t k, const Tensor& g) {
  const KernelSpec& s = custom_impl::spec(sv.id);
  const std::string what = op_name(s);
  SY_CHECK(bool(s.backward), what.c_str(),
           "expected a backward (KernelSpec::backward) to differentiate through it, found none");
  CustomBackwardArgs a{sv.inputs, sv.outputs, std::vector<Tensor>(sv.outputs.size()), sv.params};
  a.grad_outputs[k] = g;
  std::vector<Tensor> r = s.backward(a);
  SY_CHECK(r.size() == sv.inputs.size(), what.c_str(), "expected its backward to return ",
           sv.inputs.size(), " gradients (one per input, undefined for none), found ", r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    if (!r[i].defined()) continue;
    SY_CHECK(r[i].shape() == sv.inputs[i].shape() && r[i].dtype() == DType::f32, what.c_str(),
             "expected the gradient of input ", i, " ('", s.inputs[i].name,
             "') to be f32 of shape ", shape_str(sv.inputs[i].shape()), ", found ",
             dtype_name(r[i].dtype()), " of shape ", shape_str(r[i].shape()));
    SY_CHECK(&r[i].device() == &sv.inputs[i].device(), what.c_str(),
             "expected the gradient of input ", i, " on ", sv.inputs[i].device().str(),
             ", found it on ", r[i].device().str());
  }
  return r;
}

}  // namespace

std::vector<Tensor> CustomKernel::launch(const std::vector<Tensor>& inputs, const void* params,
                                         size_t bytes) const {
  const KernelSpec& s = spec();
  const std::string what = op_name(s);
  const char* op = what.c_str();
  SY_CHECK(inputs.size() == s.inputs.size(), op, "expected ", s.inputs.size(), " inputs, found ",
           inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_defined(op, inputs[i]);
    SY_CHECK(inputs[i].dtype() == s.inputs[i].dtype, op, "expected input ", i, " ('",
             s.inputs[i].name, "') of dtype ", dtype_name(s.inputs[i].dtype), ", found ",
             dtype_name(inputs[i].dtype()));
    if (i) check_same_device(op, inputs[0], inputs[i]);
  }
  SY_CHECK(bytes == s.params_bytes && (bytes == 0 || params), op, "expected ", s.params_bytes,
           " bytes of parameters, found ", params ? bytes : 0);
  Device& dev = inputs[0].device();
  compile(dev);

  std::vector<Shape> in_shapes, out_shapes;
  for (const Tensor& t : inputs) in_shapes.push_back(t.shape());
  for (size_t k = 0; k < s.outputs.size(); ++k) {
    out_shapes.push_back(s.outputs[k].shape ? s.outputs[k].shape(in_shapes) : in_shapes[0]);
    check_shape(op, out_shapes.back(), s.outputs[k].dtype);
  }
  Grid g;
  if (s.grid) {
    g = s.grid(in_shapes, out_shapes);
  } else {  // one invocation per element of output 0, unless the kernel loops
    const uint64_t need = (uint64_t(numel(out_shapes[0])) + s.workgroup[0] - 1) / s.workgroup[0];
    SY_CHECK(s.grid_stride || need <= 65535, op, "expected at most 65535 workgroups of ",
             s.workgroup[0],
             " for the default grid (one invocation per element of output 0), "
             "found ",
             numel(out_shapes[0]),
             " elements: loop over them in the kernel and set "
             "grid_stride, or give a grid function");
    g = Grid::cover(numel(out_shapes[0]), s.workgroup[0]);
  }
  if (s.grid_stride) g.x = std::min(g.x, std::max(backend_of(dev).grid_stride_workgroups(), 1u));
  SY_CHECK(g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= 65535 && g.y <= 65535 && g.z <= 65535, op,
           "expected a grid of 1 to 65535 workgroups per dimension, found ", g.x, "x", g.y, "x",
           g.z);
  CustomParams cp;
  cp.id = id_;
  cp.outputs = int64_t(s.outputs.size());
  cp.grid[0] = g.x, cp.grid[1] = g.y, cp.grid[2] = g.z;
  uint64_t w[kCustomParamBytes / 8] = {};
  if (bytes) std::memcpy(w, params, bytes);
  uint64_t* dst[] = {&cp.w0, &cp.w1, &cp.w2, &cp.w3, &cp.w4, &cp.w5, &cp.w6, &cp.w7};
  for (size_t j = 0; j < 8; ++j) *dst[j] = w[j];

  std::vector<std::pair<uint64_t, uint64_t>> parts;
  uint64_t total = 0;
  for (size_t k = 0; k < s.outputs.size(); ++k) {
    const uint64_t n = uint64_t(numel(out_shapes[k])) * dtype_size(s.outputs[k].dtype);
    parts.push_back({total, n});
    total += (std::max<uint64_t>(n, 1) + kArgAlign - 1) / kArgAlign * kArgAlign;
  }
  std::vector<Tensor> outs;
  {
    auto lock = lock_graph(inputs[0]);
    std::vector<NodePtr> nodes;
    const uint64_t align = std::max<uint64_t>(backend_of(dev).custom_arg_alignment(), 1);
    for (const Tensor& t : inputs) {
      NodePtr n = node_of(t);
      // Where the device binds arguments at aligned offsets only (Vulkan), a
      // view starting elsewhere is copied first (the kernel indexes from 0):
      // in the graph for f32 (an identity kernel), else now.
      if ((n->kind == NodeKind::leaf || n->kind == NodeKind::view) && n->offset % align) {
        if (t.dtype() == DType::f32)
          n = make_node({n}, t.shape(), DType::f32, UnaryParams{.op = Unary::none, .n = t.numel()});
        else
          n = node_of(copy_to(t, dev));
      }
      nodes.push_back(std::move(n));
    }
    const bool one = s.outputs.size() == 1;
    NodePtr packed = make_node(std::move(nodes), one ? out_shapes[0] : Shape{int64_t(total / 4)},
                               one ? s.outputs[0].dtype : DType::f32, cp);
    packed->custom_outputs = parts;
    if (one) {
      outs.push_back(wrap(packed));
    } else {
      for (size_t k = 0; k < s.outputs.size(); ++k) {
        NodePtr v = make_view(packed, parts[k].first, out_shapes[k]);
        v->dtype = s.outputs[k].dtype;
        outs.push_back(wrap(std::move(v)));
      }
    }
  }
  bool grad = false;
  for (const Tensor& t : inputs) grad |= t.requires_grad();
  if (!grad || !is_grad_enabled()) return outs;
  auto saved = std::make_shared<Saved>();
  saved->id = id_;
  for (const Tensor& t : inputs) saved->inputs.push_back(t.detach());
  for (const Tensor& t : outs) saved->outputs.push_back(t.detach());
  if (bytes)
    saved->params.assign(static_cast<const unsigned char*>(params),
                         static_cast<const unsigned char*>(params) + bytes);
  for (size_t k = 0; k < outs.size(); ++k) {
    if (outs[k].dtype() != DType::f32) continue;  // integer outputs carry no gradient
    outs[k] = with_grad(outs[k], s.name.c_str(), inputs,
                        [saved, k](const Tensor& g) { return run_backward(*saved, k, g); });
  }
  return outs;
}

std::string custom_kernels_unavailable(Device& d) {
  return backend_of(d).custom_unavailable_reason();
}

CustomKernelStats custom_kernel_stats() {
  Stats& s = stats();
  return {s.compiles.load(),    s.memory_hits.load(), s.disk_hits.load(),
          s.disk_writes.load(), s.corrupt.load(),     double(s.compile_ns.load()) * 1e-9};
}

std::string custom_kernel_cache_dir() {
  if (const char* p = std::getenv("SWITCHYARD_KERNEL_CACHE"); p && *p)
    return std::string(p) == "off" ? "" : p;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string base = xdg && *xdg ? xdg : home && *home ? std::string(home) + "/.cache" : "";
  return base.empty() ? "" : base + "/switchyard/kernels";
}

namespace custom_impl {

const KernelSpec& spec(int64_t id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  SY_CHECK(id >= 0 && size_t(id) < r.specs.size(), "custom",
           "expected a registered kernel id below ", r.specs.size(), ", found ", id);
  return *r.specs[size_t(id)];
}

std::string display_name(const KernelParams& p) {
  if (p.kernel() != Kernel::custom) return kernel_name(p.kernel());
  return "custom kernel " + spec(params<Kernel::custom>(p).id).name;
}

void param_bytes(const CustomParams& p, unsigned char out[kCustomParamBytes]) {
  const uint64_t w[] = {p.w0, p.w1, p.w2, p.w3, p.w4, p.w5, p.w6, p.w7};
  std::memcpy(out, w, kCustomParamBytes);
}

std::string cached_compile(const std::string& name, const char* ext, const std::string& key,
                           const std::function<std::string()>& compile,
                           const std::function<bool(const std::string&)>& check) {
  static std::mutex& mu = *new std::mutex;  // never destroyed, as the registry
  static auto* memory = new std::unordered_map<std::string, std::string>;
  Stats& st = stats();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memory->find(key); it != memory->end()) {
      ++st.memory_hits;
      return it->second;
    }
  }
  const std::string dir = custom_kernel_cache_dir();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  const std::string path = dir.empty() ? "" : dir + "/" + name + "-" + hex + "." + ext;
  if (!path.empty()) {
    std::optional<std::string> file;
    try {
      file = files::read_regular(path, kMaxEntryBytes, "custom kernel cache");
    } catch (const Error&) {
      ++st.corrupt;  // not a regular file, too large, unreadable: compiled and replaced
    }
    if (file) {
      std::optional<std::string> code = open_envelope(*file, key);
      if (code && (!check || check(*code))) {
        ++st.disk_hits;
        std::lock_guard<std::mutex> lock(mu);
        return memory->emplace(key, std::move(*code)).first->second;
      }
      ++st.corrupt;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string code = compile();
  st.compile_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ++st.compiles;
  std::error_code ec;
  const auto there = std::filesystem::status(path, ec);
  if (!path.empty() &&
      (!std::filesystem::exists(there) || std::filesystem::is_regular_file(there))) {
    // (Something else at the path, a FIFO or a directory, is left alone.)
    try {
      std::filesystem::create_directories(dir, ec);
      files::remove_stale_temporaries(path);  // of processes killed while writing it
      files::write_atomic(path, envelope(key, code), "custom kernel cache");
      ++st.disk_writes;
    } catch (const Error& e) {
      // The cache only saves time: a read-only or full disk costs a compile.
      static std::once_flag warned;
      std::call_once(warned, [&] {
        std::fprintf(stderr, "switchyard: custom kernel cache not written: %s\n", e.what());
      });
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  return memory->emplace(key, std::move(code)).first->second;
}

}  // namespace custom_impl

// ---- gradcheck -----------------------------------------------------------------------

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& o) {
  const char* op = "gradcheck";
  SY_CHECK(is_grad_enabled(), op,
           "expected gradients enabled (it differentiates f), found it called under NoGradGuard");
  GradcheckResult r;
  std::vector<Tensor> xs;
  bool any = false;
  for (const Tensor& t : inputs) {
    check_defined(op, t);
    Tensor c = t.detach();
    if (t.requires_grad()) {
      check_f32(op, t);
      c.requires_grad_(true);
      any = true;
    }
    xs.push_back(c);
  }
  SY_CHECK(any, op, "expected at least one input that requires grad, found none");
  Tensor y = f(xs);
  check_f32(op, y);
  SY_CHECK(y.requires_grad(), op, "expected f's output to require grad, found it has no history");
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(size_t(y.numel()));
  for (float& x : v) x = u(rng);
  y.backward(from_vector(v, y.shape(), y.device()));

  auto loss = [&](const std::vector<Tensor>& at) {
    NoGradGuard no_grad;
    Tensor out = f(at);
    SY_CHECK(out.shape() == y.shape(), op, "expected f to give shape ", shape_str(y.shape()),
             " every time, found ", shape_str(out.shape()));
    std::vector<float> h = out.to_vector<float>();
    double s = 0;
    for (size_t j = 0; j < h.size(); ++j) s += double(h[j]) * double(v[j]);
    return s;
  };
  r.ok = true;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].requires_grad()) continue;
    Tensor g = xs[i].grad();
    const std::vector<float> analytic =
        g.defined() ? g.to_vector<float>() : std::vector<float>(size_t(xs[i].numel()), 0.f);
    std::vector<float> x = xs[i].to_vector<float>();
    std::vector<Tensor> at;
    for (const Tensor& t : xs) at.push_back(t.detach());
    double worst = -INFINITY, worst_a = 0, worst_n = 0;
    size_t worst_j = 0;
    for (size_t j = 0; j < x.size(); ++j) {
      const float x0 = x[j];
      const float hi = float(double(x0) + o.eps), lo = float(double(x0) - o.eps);
      SY_CHECK(hi != lo, op, "expected a step eps = ", o.eps, " that changes element ", j,
               " of input ", i, " (", x0, ") in f32, found it does not: use a larger eps");
      x[j] = hi;
      at[i] = from_vector(x, xs[i].shape(), xs[i].device());
      const double lp = loss(at);
      x[j] = lo;
      at[i] = from_vector(x, xs[i].shape(), xs[i].device());
      const double lm = loss(at);
      x[j] = x0;
      const double numeric = (lp - lm) / (double(hi) - double(lo));
      const double err = std::fabs(double(analytic[j]) - numeric);
      double excess = err - (o.atol + o.rtol * std::fabs(numeric));
      if (std::isnan(excess)) excess = INFINITY;  // a NaN or an infinity anywhere fails
      r.max_abs_error = std::isnan(err) ? INFINITY : std::max(r.max_abs_error, err);
      if (!(excess <= 0)) r.ok = false;
      if (excess > worst || j == 0)
        worst = excess, worst_a = analytic[j], worst_n = numeric, worst_j = j;
    }
    char line[256];
    std::snprintf(line, sizeof line,
                  "input %zu %s: worst element %zu: analytic %.6g, numeric %.6g (%s)\n", i,
                  shape_str(xs[i].shape()).c_str(), worst_j, worst_a, worst_n,
                  worst <= 0 ? "within the tolerance" : "outside the tolerance");
    r.report += line;
  }
  return r;
}

}  // namespace switchyard
