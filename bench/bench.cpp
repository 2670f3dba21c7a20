// SPDX-License-Identifier: MIT
// `switchyard bench`: kernels, transfers and the MLP on every device, with
// wall time and device time, ceilings, and table/JSON/CSV/SVG output.
//
// Ops drive the Device interface directly (no graph, no scheduler): one
// Program of R identical launches per run, synchronized. Transfers use
// upload/download (the device's own path: zero-copy or staging) and copies
// from and to pinned host memory. Models go through the whole runtime: an
// MLP training step (forward, backward, Adam) and inference.
//
// Every run is timed on the host's clock (wall) and, through the profiler, by
// the device itself (Vulkan timestamp queries, CUDA events, the CPU's clock
// around each kernel): device time is the sum of the run's kernel and
// transfer events.
#include "bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "mlp.h"
#include "report.h"
#include "switchyard/backend/device.h"
#include "switchyard/optim.h"
#include "switchyard/profile.h"
#include "switchyard/switchyard.h"
#include "workload.h"

namespace switchyard::bench {

std::string closest_option(const std::string& word, const std::vector<std::string>& known) {
  auto dist = [](const std::string& a, const std::string& b) {
    std::vector<size_t> d(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) d[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t prev = d[0]++;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t cur = d[j];
        d[j] = std::min({d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
        prev = cur;
      }
    }
    return d[b.size()];
  };
  std::string best;
  size_t best_d = 3;  // at most two edits away
  for (const auto& k : known)
    if (size_t d = dist(word, k); d < best_d) best = k, best_d = d;
  return best;
}

namespace {

using Clock = std::chrono::steady_clock;

const std::vector<std::string> kGroups = {"gemm",    "conv",  "elementwise", "reduce",
                                          "softmax", "optim", "transfer",    "model"};

struct BenchOptions {
  std::vector<std::string> devices;
  std::string baseline = "cpu";
  std::set<std::string> groups;
  std::vector<int64_t> sizes;
  bool quick = false;
  std::string json, csv, svg, title;
  bool child = false;  // the forced-staging re-run: CSV of transfers only
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- measurement ----------------------------------------------------------------------
struct Timing {
  std::vector<double> wall, dev;  // seconds per run
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs `run` after warm-up until the time budget is spent (between min_runs
// and max_runs times): the wall times. Then a few more runs with the
// profiler on give the device times: the run's kernel and transfer events on
// this device. Profiling changes the host's path (Vulkan records each run
// anew, CUDA runs eagerly), so it stays off while wall time is measured.
Timing measure(BackendDevice& d, const std::function<void()>& run, const BenchOptions& o) {
  const double budget = o.quick ? 0.15 : 0.6;
  const int min_runs = o.quick ? 3 : 5, max_runs = o.quick ? 7 : 25;
  profile::set_enabled(false);
  run();  // warm-up: pipelines, recordings, graphs, buffer pools
  run();
  Timing t;
  double total = 0;
  while ((int(t.wall.size()) < min_runs || total < budget) && int(t.wall.size()) < max_runs) {
    auto t0 = Clock::now();
    run();
    double w = seconds_since(t0);
    total += w;
    t.wall.push_back(w);
  }
  const std::string name = d.str();
  profile::set_enabled(true);
  run();  // warm-up of the profiled path
  profile::take();
  for (size_t k = 0; k < t.wall.size(); ++k) {
    run();
    int64_t ns = 0;
    bool any = false;
    for (const profile::Event& e : profile::take())
      if (e.device == name &&
          (e.track == profile::Track::kernel || e.track == profile::Track::transfer))
        ns += e.dur_ns, any = true;
    if (any) t.dev.push_back(double(ns) * 1e-9);
  }
  profile::set_enabled(false);
  return t;
}

Result summarize(const Workload& w, BackendDevice& d, const Timing& t, double work) {
  Result r;
  r.group = w.group, r.workload = w.name, r.unit = w.unit, r.device = d.str();
  r.flop_per_unit = w.flop_per_unit;
  r.runs = int(t.wall.size());
  double med = median(t.wall);
  r.wall_ms = med * 1e3;
  r.median = work * w.scale / med;
  r.min = work * w.scale / *std::max_element(t.wall.begin(), t.wall.end());
  r.max = work * w.scale / *std::min_element(t.wall.begin(), t.wall.end());
  if (!t.dev.empty()) {
    double dm = median(t.dev);
    r.device_ms = dm * 1e3;
    if (dm > 0) r.device_median = work * w.scale / dm;
  }
  return r;
}

// ---- device-level helpers --------------------------------------------------------------
struct DevBuf {
  BackendDevice* d;
  Buffer b;
  DevBuf(BackendDevice& dev, size_t bytes) : d(&dev), b(dev.allocate(bytes)) {}
  ~DevBuf() { d->release(b); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

void upload_random(BackendDevice& d, Buffer b, size_t floats, uint32_t seed, float lo = -1.f,
                   float hi = 1.f) {
  std::vector<float> v(floats);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& f : v) {  // a cheap LCG: benchmark inputs need spread, not quality
    x = x * 1664525u + 1013904223u;
    f = lo + (hi - lo) * float(x >> 8) * (1.f / 16777216.f);
  }
  d.upload(b, 0, v.data(), floats * 4);
  d.synchronize();
}

uint64_t next_program_id() {
  static uint64_t id = 1ull << 40;
  return id++;
}

// A workload of one kernel: buffers (bytes each, filled with random values in
// [lo, hi) unless integer labels), one launch. Runs as a Program of R launches,
// R chosen from the warm-up so that a run takes a few milliseconds.
struct KernelCase {
  Instr ins;
  std::vector<size_t> bytes;  // per argument
  std::vector<int> labels;    // arguments holding i32 labels in [0, classes)
  int classes = 10;
};

Prepared prepare_kernel(BackendDevice& d, KernelCase kc, double work) {
  auto bufs = std::make_shared<std::vector<std::unique_ptr<DevBuf>>>();
  std::vector<Binding> bind;
  for (size_t a = 0; a < kc.bytes.size(); ++a) {
    bufs->push_back(std::make_unique<DevBuf>(d, std::max<size_t>(kc.bytes[a], 4)));
    Buffer b = bufs->back()->b;
    if (std::find(kc.labels.begin(), kc.labels.end(), int(a)) != kc.labels.end()) {
      std::vector<int32_t> l(kc.bytes[a] / 4);
      for (size_t k = 0; k < l.size(); ++k) l[k] = int32_t(k * 7 % size_t(kc.classes));
      d.upload(b, 0, l.data(), l.size() * 4);
    } else {
      upload_random(d, b, kc.bytes[a] / 4, uint32_t(a + 1), 0.1f, 1.f);
    }
    bind.push_back({b, 0});
    kc.ins.args[a] = {uint32_t(a), 0, kc.bytes[a]};
  }
  kc.ins.nargs = uint8_t(kc.bytes.size());
  d.synchronize();
  // R from one launch's time.
  Program one;
  one.id = next_program_id();
  one.num_slots = uint32_t(bind.size());
  one.instrs = {kc.ins};
  d.execute(one, bind);  // first: compiles, records
  d.synchronize();
  auto t0 = Clock::now();
  d.execute(one, bind);
  d.synchronize();
  double t1 = seconds_since(t0);
  int reps = int(std::clamp(0.01 / std::max(t1, 1e-7), 1.0, 64.0));
  auto prog = std::make_shared<Program>();
  prog->id = next_program_id();
  prog->num_slots = one.num_slots;
  prog->instrs.assign(size_t(reps), kc.ins);
  Prepared p;
  p.work = work * reps;
  p.run = [&d, prog, bind, bufs] {
    d.execute(*prog, bind);
    d.synchronize();
  };
  p.cleanup = [bufs] { bufs->clear(); };
  return p;
}

// A launch of the kernel `p` belongs to.
Instr make(const KernelParams& p) {
  Instr i;
  i.kernel = p.kernel();
  i.params = p;
  return i;
}

std::string fmt_size(int64_t n) {
  if (n >= (1 << 20) && n % (1 << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

// ---- the workloads ----------------------------------------------------------------------
constexpr int64_t kMlpIn = 784, kMlpH1 = 256, kMlpH2 = 128, kMlpOut = 10;

void append(std::vector<Workload>& to, std::vector<Workload> more) {
  for (auto& x : more) to.push_back(std::move(x));
}

// One kernel launch measured in GB/s: `bytes` read and written per run.
Workload kernel_gbs(std::string group, std::string name, KernelCase kc, double bytes) {
  return {std::move(group),
          std::move(name),
          "GB/s",
          1e-9,
          0,
          [](BackendDevice&) { return true; },
          [kc, bytes](BackendDevice& d) { return prepare_kernel(d, kc, bytes); }};
}

std::vector<Workload> workloads(const BenchOptions& o) {
  std::vector<Workload> w;
  auto want = [&](const char* g) { return o.groups.count(g) > 0; };
  auto sizes_or = [&](std::vector<int64_t> full, std::vector<int64_t> quick) {
    return !o.sizes.empty() ? o.sizes : o.quick ? quick : full;
  };
  if (want("gemm")) {
    struct G {
      std::string name;
      int64_t M, N, K;
      bool ta, tb;
    };
    std::vector<G> gs;
    for (int64_t n : sizes_or({256, 512, 1024, 2048}, {256, 1024}))
      gs.push_back({"gemm " + std::to_string(n) + "^3", n, n, n, false, false});
    if (o.sizes.empty()) {
      // The MLP's first layer at batch 128, in the three transposes its
      // forward and backward passes use.
      gs.push_back({"gemm mlp fwd Y=X.W^T 128x256x784", 128, kMlpH1, kMlpIn, false, true});
      gs.push_back({"gemm mlp bwd dX=dY.W 128x784x256", 128, kMlpIn, kMlpH1, false, false});
      gs.push_back({"gemm mlp bwd dW=dY^T.X 256x784x128", kMlpH1, kMlpIn, 128, true, false});
    }
    for (const G& g : gs)
      w.push_back(
          {"gemm", g.name, "GFLOP/s", 1e-9, 0, [](BackendDevice&) { return true; },
           [g](BackendDevice& d) {
             GemmParams p{
                 .m = g.M, .n = g.N, .k = g.K, .trans_a = g.ta, .trans_b = g.tb, .alpha = 1.f};
             KernelCase kc{make(p),
                           {size_t(g.M * g.N * 4), size_t(g.M * g.K * 4), size_t(g.K * g.N * 4)},
                           {}};
             return prepare_kernel(d, kc, 2.0 * double(g.M) * double(g.N) * double(g.K));
           }});
  }
  if (want("conv")) append(w, conv_workloads());
  auto elems = [&](std::vector<int64_t> full, std::vector<int64_t> quick) {
    std::vector<int64_t> n = sizes_or(full, quick);
    if (!o.sizes.empty())
      for (auto& x : n) x <<= 20;  // --sizes in Mi elements
    return n;
  };
  // Sizes well beyond the CPU's caches, within Vulkan's 128 MiB binding limit
  // for one tensor on small devices.
  if (want("elementwise"))
    for (int64_t n : elems({4 << 20, 16 << 20}, {16 << 20})) {
      w.push_back({"elementwise", "add " + fmt_size(n), "GB/s", 1e-9, 0,
                   [](BackendDevice&) { return true; },
                   [n](BackendDevice& d) {
                     BinaryParams p{.op = Binary::add,
                                    .dims = {1, 1, 1, n},
                                    .a_strides = {0, 0, 0, 1},
                                    .b_strides = {0, 0, 0, 1}};
                     KernelCase kc{make(p), {size_t(n * 4), size_t(n * 4), size_t(n * 4)}, {}};
                     return prepare_kernel(d, kc, 3.0 * double(n) * 4);
                   }});
      w.push_back({"elementwise", "relu " + fmt_size(n), "GB/s", 1e-9, 0,
                   [](BackendDevice&) { return true; },
                   [n](BackendDevice& d) {
                     KernelCase kc{make(UnaryParams{.op = Unary::relu, .n = n}),
                                   {size_t(n * 4), size_t(n * 4)},
                                   {}};
                     return prepare_kernel(d, kc, 2.0 * double(n) * 4);
                   }});
      w.push_back({"elementwise", "relu " + fmt_size(n) + " (custom kernel)", "GB/s", 1e-9, 0,
                   [](BackendDevice& d) { return custom_kernels_unavailable(d).empty(); },
                   [n](BackendDevice& d) {
                     KernelCase kc{custom_relu_launch(d, n), {size_t(n * 4), size_t(n * 4)}, {}};
                     return prepare_kernel(d, kc, 2.0 * double(n) * 4);
                   }});
      // A matrix's transpose (x.t().contiguous()): 4096 rows.
      const int64_t tc = std::max<int64_t>(n / 4096, 1);
      w.push_back(kernel_gbs("elementwise", "transpose 4096x" + std::to_string(tc),
                             {make(TransposeParams{.rows = 4096, .cols = tc, .elem_size = 4}),
                              {size_t(4096 * tc * 4), size_t(4096 * tc * 4)},
                              {}},
                             2.0 * double(4096 * tc) * 4));
    }
  if (want("reduce"))
    for (int64_t n : elems({4 << 20, 16 << 20}, {16 << 20})) {
      const int64_t rows = 4096, cols = std::max<int64_t>(n / rows, 1);
      std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
      ReduceSumParams by_row{.outer = rows, .len = cols, .inner = 1, .scale = 1.f};
      w.push_back(kernel_gbs("reduce", "sum rows " + shape,
                             {make(by_row), {size_t(rows * 4), size_t(rows * cols * 4)}, {}},
                             double(rows * cols) * 4));
      ReduceSumParams by_col{.outer = 1, .len = rows, .inner = cols, .scale = 1.f};
      w.push_back(kernel_gbs("reduce", "sum cols " + shape,
                             {make(by_col), {size_t(cols * 4), size_t(rows * cols * 4)}, {}},
                             double(rows * cols) * 4));
      w.push_back(kernel_gbs("reduce", "argmax rows " + shape,
                             {make(ArgmaxParams{.rows = rows, .cols = cols}),
                              {size_t(rows * 4), size_t(rows * cols * 4)},
                              {}},
                             double(rows * cols) * 4));
      // A bias gradient: the sum over a long batch of a narrow layer's rows.
      const int64_t batch = std::max<int64_t>(n / kMlpOut, 1);
      ReduceSumParams bias{.outer = 1, .len = batch, .inner = kMlpOut, .scale = 1.f};
      w.push_back(kernel_gbs("reduce", "bias grad " + std::to_string(batch) + "x10",
                             {make(bias), {size_t(kMlpOut * 4), size_t(batch * kMlpOut * 4)}, {}},
                             double(batch * kMlpOut) * 4));
    }
  if (want("softmax"))
    for (int64_t n : elems({4 << 20, 16 << 20}, {16 << 20})) {
      const int64_t rows = 4096, cols = std::max<int64_t>(n / rows, 1);
      w.push_back(kernel_gbs("softmax",
                             "softmax " + std::to_string(rows) + "x" + std::to_string(cols),
                             {make(SoftmaxParams{.rows = rows, .cols = cols}),
                              {size_t(rows * cols * 4), size_t(rows * cols * 4)},
                              {}},
                             2.0 * double(rows * cols) * 4));
      // The classifier's loss: 10 classes, as many rows as fit.
      const int64_t ce = std::max<int64_t>(n / kMlpOut, 1);
      const size_t logits = size_t(ce * kMlpOut * 4), labels = size_t(ce * 4);
      w.push_back(kernel_gbs(
          "softmax", "cross_entropy " + std::to_string(ce) + "x10",
          {make(CrossEntropyParams{.rows = ce, .cols = kMlpOut}), {4, logits, labels}, {2}},
          double(ce) * (kMlpOut + 1) * 4));
      w.push_back(kernel_gbs("softmax", "cross_entropy_backward " + std::to_string(ce) + "x10",
                             {make(CrossEntropyBackwardParams{.rows = ce, .cols = kMlpOut}),
                              {logits, logits, labels, 4},
                              {2}},
                             double(ce) * (2 * kMlpOut + 1) * 4));
    }
  if (want("optim"))
    for (int64_t n : elems({4 << 20, 16 << 20}, {4 << 20})) {
      w.push_back({"optim", "sgd momentum " + fmt_size(n), "GB/s", 1e-9, 0,
                   [](BackendDevice&) { return true; },
                   [n](BackendDevice& d) {
                     SgdMomentumParams p{.n = n, .lr = 1e-3f, .momentum = 0.9f};
                     KernelCase kc{make(p), {size_t(n * 4), size_t(n * 4), size_t(n * 4)}, {}};
                     return prepare_kernel(d, kc,
                                           5.0 * double(n) * 4);  // reads p, buf, g; writes p, buf
                   }});
      w.push_back(
          {"optim", "adam " + fmt_size(n), "GB/s", 1e-9, 0, [](BackendDevice&) { return true; },
           [n](BackendDevice& d) {
             AdamParams p{.n = n, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
             KernelCase kc{
                 make(p), {size_t(n * 4), size_t(n * 4), size_t(n * 4), size_t(n * 4), 4}, {}};
             return prepare_kernel(d, kc, 7.0 * double(n) * 4);  // reads p, m, v, g; writes p, m, v
           }});
    }
  if (want("transfer")) {
    auto gpu = [](BackendDevice& d) { return d.info().backend != "cpu"; };
    for (int64_t mib : sizes_or({1, 4, 16, 64, 256}, {1, 16})) {
      size_t bytes = size_t(mib) << 20;
      for (bool up : {true, false}) {
        // The device's own path for pageable host memory: zero-copy or staging.
        w.push_back(
            {"transfer",
             std::string(up ? "upload " : "download ") + "%MODE% " + std::to_string(mib) + " MiB",
             "GB/s", 1e-9, 0, gpu, [bytes, up](BackendDevice& d) {
               auto buf = std::make_shared<DevBuf>(d, bytes);
               auto host = std::make_shared<std::vector<char>>(bytes, 1);
               Prepared p;
               p.work = double(bytes);
               p.run = [&d, buf, host, bytes, up] {
                 if (up)
                   d.upload(buf->b, 0, host->data(), bytes);
                 else
                   d.download(buf->b, 0, host->data(), bytes);
                 d.synchronize();
               };
               return p;
             }});
        // From and to pinned host memory (Tensor::pin_memory): a device-side copy.
        w.push_back(
            {"transfer",
             std::string(up ? "upload " : "download ") + "pinned " + std::to_string(mib) + " MiB",
             "GB/s", 1e-9, 0, gpu, [bytes, up](BackendDevice& d) {
               auto buf = std::make_shared<DevBuf>(d, bytes);
               Buffer h = d.allocate_host(bytes);
               SY_CHECK(h, "bench", "expected pinned host memory on ", d.str(), ", found none");
               std::memset(d.host_pointer(h), 1, bytes);
               Prepared p;
               p.work = double(bytes);
               p.run = [&d, buf, h, bytes, up] {
                 if (up)
                   d.copy(h, 0, buf->b, 0, bytes);
                 else
                   d.copy(buf->b, 0, h, 0, bytes);
                 d.synchronize();
               };
               p.cleanup = [&d, h] { d.release(h); };
               return p;
             }});
      }
    }
  }
  if (want("model")) {
    // FLOP per sample: the forward GEMMs; a training step adds the weight
    // gradients of every layer and the input gradients of all but the first.
    const double fwd_flop = 2.0 * double(kMlpIn * kMlpH1 + kMlpH1 * kMlpH2 + kMlpH2 * kMlpOut);
    const double train_flop = 2 * fwd_flop + 2.0 * double(kMlpH1 * kMlpH2 + kMlpH2 * kMlpOut);
    for (int64_t batch : sizes_or({32, 128, 512}, {32, 128, 512})) {
      auto setup = [batch](BackendDevice& d) {
        struct M {
          std::shared_ptr<nn::Sequential> model;
          std::unique_ptr<optim::Adam> opt;
          Tensor x, y;
        };
        auto m = std::make_shared<M>();
        manual_seed(1);
        m->model = models::mlp({kMlpIn, kMlpH1, kMlpH2, kMlpOut});
        m->model->to(d);
        m->opt = std::make_unique<optim::Adam>(m->model->parameters(), 1e-3f);
        m->x = rand({batch, kMlpIn}, Options(d));
        std::vector<int32_t> labels(static_cast<size_t>(batch));
        for (size_t k = 0; k < labels.size(); ++k) labels[k] = int32_t(k % kMlpOut);
        m->y = from_vector(labels, {batch}, Options(d));
        return m;
      };
      // A training step: forward, loss, backward, Adam; the loss read back.
      w.push_back({"model", "mlp train step batch " + std::to_string(batch), "samples/s", 1.0,
                   train_flop, [](BackendDevice&) { return true; },
                   [setup, batch](BackendDevice& d) {
                     auto m = setup(d);
                     Prepared p;
                     p.work = double(batch);
                     p.run = [m] {
                       m->opt->zero_grad();
                       Tensor loss = cross_entropy((*m->model)(m->x), m->y);
                       loss.backward();
                       m->opt->step();
                       (void)loss.item();
                     };
                     return p;
                   }});
      // Inference: forward and the logits read back.
      w.push_back({"model", "mlp inference batch " + std::to_string(batch), "samples/s", 1.0,
                   fwd_flop, [](BackendDevice&) { return true; },
                   [setup, batch](BackendDevice& d) {
                     auto m = setup(d);
                     m->model->train(false);
                     Prepared p;
                     p.work = double(batch);
                     p.run = [m] {
                       NoGradGuard ng;
                       (void)(*m->model)(m->x).to_vector<float>();
                     };
                     return p;
                   }});
    }
  }
  if (want("model")) append(w, cnn_workloads());
  return w;
}

// The device's path for pageable host memory, as `switchyard devices` shows it.
std::string transfer_mode(BackendDevice& d) {
  if (d.info().backend == "cuda") return "staging";
  for (auto& [k, v] : d.info().properties)
    if (k == "memory") return v.rfind("zero-copy", 0) == 0 ? "zero-copy" : "staging";
  return "staging";
}

// ---- ceilings -----------------------------------------------------------------------------
Ceilings measure_ceilings(BackendDevice& d, const BenchOptions& o) {
  Ceilings c;
  // Bandwidth: a device-to-device copy (bytes read + written).
  {
    size_t bytes = (o.quick ? 64ull : 256ull) << 20;
    DevBuf a(d, bytes), b(d, bytes);
    upload_random(d, a.b, bytes / 4, 7);
    Timing t = measure(
        d,
        [&] {
          d.copy(a.b, 0, b.b, 0, bytes);
          d.synchronize();
        },
        o);
    c.gbs = 2.0 * double(bytes) / median(t.wall) * 1e-9;
  }
  // Compute: the best square GEMM.
  for (int64_t n : o.quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 2048}) {
    KernelCase kc{make(GemmParams{.m = n, .n = n, .k = n, .alpha = 1.f}),
                  {size_t(n * n * 4), size_t(n * n * 4), size_t(n * n * 4)},
                  {}};
    Prepared p = prepare_kernel(d, kc, 2.0 * double(n) * double(n) * double(n));
    Timing t = measure(d, p.run, o);
    c.gflops = std::max(c.gflops, p.work / median(t.wall) * 1e-9);
    if (p.cleanup) p.cleanup();
  }
  return c;
}

double host_memcpy_gbs(const BenchOptions& o) {
  size_t bytes = (o.quick ? 64ull : 256ull) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::vector<double> t;
  std::memcpy(b.data(), a.data(), bytes);  // warm-up
  for (int k = 0; k < (o.quick ? 5 : 9); ++k) {
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    t.push_back(seconds_since(t0));
  }
  return double(bytes) / median(t) * 1e-9;
}

// ---- driver -------------------------------------------------------------------------------
// The options, with CLI11; nullopt when --help was asked (printed here).
std::optional<BenchOptions> parse(const std::vector<std::string>& args) {
  BenchOptions o;
  CLI::App app{
      "The same workloads on every device, side by side. Figures are the median over repeated runs "
      "after warm-up, with the spread (max - min) / median.",
      "switchyard bench"};
  std::string devices, ops, sizes;
  app.add_option("--devices", devices,
                 "devices to compare, e.g. cpu,vulkan:0,cuda:0 (default: every available one)");
  app.add_option("--baseline", o.baseline, "device the speed-up column compares against")
      ->capture_default_str();
  app.add_option(
      "--ops", ops,
      "groups to run: gemm,conv,elementwise,reduce,softmax,optim,transfer,model (default: all)");
  app.add_option("--sizes", sizes,
                 "the size of each selected group: GEMM square N, elements in Mi (2^20) for "
                 "elementwise/reduce/softmax/optim, MiB for transfers, batch for models");
  app.add_flag("--quick", o.quick,
               "fewer sizes and runs (under a minute on a 2-core CPU with lavapipe)");
  app.add_option("--json", o.json, "write every figure as JSON ('-': stdout)");
  app.add_option("--csv", o.csv, "write every figure as CSV ('-': stdout)");
  app.add_option("--svg", o.svg,
                 "write a grouped bar chart (one group per workload, one bar per device)");
  app.add_option("--title", o.title,
                 "a line saying where the figures come from, in the chart and the outputs");
  app.add_flag("--staging-child", o.child)->group("");       // internal: the forced-staging re-run
  std::vector<std::string> rev(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(rev);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    std::vector<std::string> known;
    for (const CLI::Option* opt : app.get_options())
      for (const std::string& n : opt->get_lnames()) known.push_back("--" + n);
    for (const std::string& extra : app.remaining())
      if (std::string c = closest_option(extra, known); !c.empty())
        msg += " (did you mean " + c + "?)";
    throw Error("[bench] " + msg + "; see switchyard bench --help");
  }
  if (!devices.empty()) o.devices = split(devices, "--devices");
  if (!ops.empty())
    for (auto& g : split(ops, "--ops")) {
      if (std::find(kGroups.begin(), kGroups.end(), g) == kGroups.end())
        throw Error(
            "[bench] --ops: expected some of "
            "gemm,conv,elementwise,reduce,softmax,optim,transfer,model, "
            "found '" +
            g + "'");
      o.groups.insert(g);
    }
  if (!sizes.empty())
    for (auto& sz : split(sizes, "--sizes")) {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(sz, &used);
      } catch (const std::exception&) {
      }
      if (used != sz.size() || v <= 0)
        throw Error("[bench] --sizes expects positive integers, found '" + sz + "'");
      o.sizes.push_back(v);
    }
  if (o.groups.empty()) o.groups.insert(kGroups.begin(), kGroups.end());
  return o;
}

// Vulkan devices in zero-copy mode also have a staging path; it is measured
// by this program run again with SWITCHYARD_VK_FORCE_STAGING=1.
std::vector<Result> staging_rerun(const BenchOptions& o, const std::vector<BackendDevice*>& devs) {
  std::string list;
  for (BackendDevice* d : devs)
    if (d->info().backend == "vulkan" && transfer_mode(*d) == "zero-copy")
      list += (list.empty() ? "" : ",") + d->str();
  const char* forced = std::getenv("SWITCHYARD_VK_FORCE_STAGING");  // read as the backend reads it
  if (list.empty() || (forced && *forced && std::string(forced) != "0")) return {};
  std::string args = "bench --staging-child --ops transfer --devices " + list + " --csv -" +
                     (o.quick ? " --quick" : "");
  if (!o.sizes.empty()) {
    args += " --sizes ";
    for (size_t k = 0; k < o.sizes.size(); ++k) args += (k ? "," : "") + std::to_string(o.sizes[k]);
  }
  std::fprintf(stderr, "bench: measuring the staging path of %s in a second process\n",
               list.c_str());
  // The rest of the benchmark stands without these figures if this fails.
  std::string out, why;
  if (!rerun_with_staging(args, out, why)) {
    std::fprintf(stderr, "bench: warning: the staging-path run %s, its figures are left out\n",
                 why.c_str());
    return {};
  }
  std::vector<Result> rs;
  for (Result& x : from_csv(out))
    if (x.workload.find("staging") != std::string::npos) rs.push_back(x);
  return rs;
}

}  // namespace

std::vector<std::string> split(const std::string& s, const char* what) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  if (out.empty())
    throw Error(std::string("[bench] ") + what + " expects a comma-separated list, found '" + s +
                "'");
  return out;
}

int run(const std::vector<std::string>& args) {
  std::optional<BenchOptions> parsed = parse(args);
  if (!parsed) return 0;  // --help
  const BenchOptions& o = *parsed;
  auto t_start = Clock::now();
  std::vector<BackendDevice*> devs;
  if (o.devices.empty())
    for (Device* d : switchyard::devices()) devs.push_back(&backend_of(*d));
  else
    for (auto& n : o.devices)  // "vulkan" and "vulkan:0" are one device, measured once
      if (BackendDevice* d = &backend_of(device(n));
          std::find(devs.begin(), devs.end(), d) == devs.end())
        devs.push_back(d);
  BackendDevice* base = o.child ? nullptr : &backend_of(device(o.baseline));
  if (base && std::find(devs.begin(), devs.end(), base) == devs.end())
    devs.insert(devs.begin(), base);  // the baseline joins the comparison
  bool was_on = profile::enabled();
  profile::take();

  Report rep;
  rep.devices.assign(devs.begin(), devs.end());
  rep.baseline = base ? base->str() : "";
  rep.quick = o.quick;
  rep.title = o.title;
  FILE* log = o.child || o.json == "-" || o.csv == "-" ? stderr : stdout;
  // First, while this process is idle: its own threads (OpenBLAS's, the CPU
  // pool's) still spinning after work would slow the second process down.
  std::vector<Result> staged =
      o.child || !o.groups.count("transfer") ? std::vector<Result>{} : staging_rerun(o, devs);
  if (!o.child) {
    std::fprintf(log, "# switchyard bench%s\n", o.quick ? " --quick" : "");
    if (!o.title.empty()) std::fprintf(log, "# %s\n", o.title.c_str());
    for (BackendDevice* d : devs)
      std::fprintf(log, "# %-10s %s\n", d->str().c_str(), d->info().name.c_str());
    rep.memcpy_gbs = host_memcpy_gbs(o);
    for (BackendDevice* d : devs) {
      std::fprintf(stderr, "bench: ceilings of %s\n", d->str().c_str());
      rep.ceilings[d->str()] = measure_ceilings(*d, o);
    }
  }
  std::vector<Workload> ws = workloads(o);
  for (Workload& w : ws) {
    for (BackendDevice* d : devs) {
      if (!w.applies(*d)) continue;
      Workload wd = w;
      std::string mode = transfer_mode(*d);
      if (auto p = wd.name.find("%MODE%"); p != std::string::npos) wd.name.replace(p, 6, mode);
      std::fprintf(stderr, "bench: %-40s on %s\n", wd.name.c_str(), d->str().c_str());
      if (std::find(rep.order.begin(), rep.order.end(), wd.name) == rep.order.end())
        rep.order.push_back(wd.name);
      try {
        Prepared p = wd.prepare(*d);
        struct Cleanup {
          Prepared& p;
          ~Cleanup() {
            if (p.cleanup) p.cleanup();
          }
        } cleanup{p};
        Timing t = measure(*d, p.run, o);
        rep.results.push_back(summarize(wd, *d, t, p.work));
      } catch (const DeviceLimit& e) {  // sizes this device cannot take: the others' figures stand
        std::fprintf(stderr, "bench: %s on %s not measured: %s\n", wd.name.c_str(),
                     d->str().c_str(), e.what());
        rep.not_measured.push_back({wd.name, d->str(), e.what()});
      }
    }
  }
  profile::take();
  profile::set_enabled(was_on);
  if (o.child) {
    write_file("-", to_csv(rep), "CSV");
    return 0;
  }
  for (Result& x : staged) {
    if (std::find(rep.order.begin(), rep.order.end(), x.workload) == rep.order.end()) {
      // After the same size's other transfers.
      auto at = rep.order.end();
      // After the same direction and size ("upload ... 16 MiB").
      std::string size = x.workload.substr(x.workload.rfind(' ', x.workload.size() - 5));
      std::string dir = x.workload.substr(0, x.workload.find(' '));
      for (auto it = rep.order.begin(); it != rep.order.end(); ++it)
        if (it->size() >= size.size() &&
            it->compare(it->size() - size.size(), size.size(), size) == 0 && it->rfind(dir, 0) == 0)
          at = it;
      rep.order.insert(at == rep.order.end() ? at : at + 1, x.workload);
    }
    rep.results.push_back(x);
  }
  // Ceilings: the best GEMM includes every GEMM measured.
  for (const Result& x : rep.results)
    if (x.group == "gemm")
      rep.ceilings[x.device].gflops = std::max(rep.ceilings[x.device].gflops, x.median);
  for (Result& x : rep.results) {
    const Ceilings& c = rep.ceilings[x.device];
    if (x.unit == "GFLOP/s" && c.gflops > 0)
      x.share = x.median / c.gflops, x.ceiling = "gemm";
    else if (x.group == "transfer" && rep.memcpy_gbs > 0)
      x.share = x.median / rep.memcpy_gbs, x.ceiling = "host memcpy";
    else if (x.unit == "GB/s" && c.gbs > 0)
      x.share = x.median / c.gbs, x.ceiling = "copy";
    else if (x.unit == "samples/s" && c.gflops > 0 && x.flop_per_unit > 0)
      x.share = x.median * x.flop_per_unit * 1e-9 / c.gflops, x.ceiling = "gemm";
    if (const Result* b = find_result(rep, x.workload, rep.baseline); b && b->median > 0)
      x.speedup = x.median / b->median;
  }
  rep.seconds = seconds_since(t_start);
  std::fputs(to_table(rep).c_str(), log);
  std::fprintf(log, "\nbench: %zu figures on %zu devices in %.1f s\n", rep.results.size(),
               devs.size(), rep.seconds);
  if (!o.json.empty()) write_file(o.json, to_json(rep), "JSON");
  if (!o.csv.empty()) write_file(o.csv, to_csv(rep), "CSV");
  if (!o.svg.empty()) write_file(o.svg, to_svg(rep), "SVG");
  return 0;
}

}  // namespace switchyard::bench
