// switchyard_bench: kernel, transfer and dispatch figures per device.
//
// Drives the Device interface directly (no graph, no scheduler), so what it
// times is the backend: one Program of R identical launches per submission,
// synchronized, the median of several runs after a warm-up.
//
//   switchyard_bench [--devices cpu,vulkan:0] [--quick] [--only gemm,elementwise,transfer,dispatch]
//
// Transfers are measured for the device's own memory mode; for Vulkan the
// bench runs itself again with SWITCHYARD_VK_FORCE_STAGING=1 to add the
// staging-ring figures (unless --no-reexec).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "switchyard/switchyard.h"

namespace sy = switchyard;
using Clock = std::chrono::steady_clock;

namespace {

bool quick = false;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Median seconds per call of fn (which must finish its work), after warm-up;
// repeats until ~0.3 s (0.1 s quick) or 7 runs.
double time_median(const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  double total = 0;
  double budget = quick ? 0.1 : 0.3;
  while ((t.size() < 3 || total < budget) && t.size() < 7) {
    auto t0 = Clock::now();
    fn();
    t.push_back(seconds_since(t0));
    total += t.back();
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct DevBuf {
  sy::Device* d;
  sy::Buffer b;
  DevBuf(sy::Device& dev, size_t bytes) : d(&dev), b(dev.allocate(bytes)) {}
  ~DevBuf() { d->release(b); }
  DevBuf(const DevBuf&) = delete;
};

void upload_random(sy::Device& d, const DevBuf& b, size_t floats, uint32_t seed) {
  std::vector<float> v(floats);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : v) x = u(rng);
  d.upload(b.b, 0, v.data(), floats * 4);
  d.synchronize();
}

sy::Program program(sy::Instr ins, int reps, uint32_t slots) {
  static uint64_t next_id = 1u << 30;
  sy::Program p;
  p.id = next_id++;
  p.num_slots = slots;
  p.instrs.assign(size_t(reps), ins);
  return p;
}

sy::Instr instr(sy::Kernel k, std::initializer_list<std::pair<uint32_t, uint64_t>> args) {
  sy::Instr ins;
  ins.kernel = k;
  ins.nargs = uint8_t(args.size());
  int a = 0;
  for (auto [slot, bytes] : args) ins.args[size_t(a++)] = {slot, 0, bytes};
  return ins;
}

// Seconds per launch: Programs of `reps` launches, executed and synchronized.
double per_launch(sy::Device& d, const sy::Program& p, const std::vector<sy::Binding>& bind) {
  double t = time_median([&] {
    d.execute(p, bind);
    d.synchronize();
  });
  return t / double(p.instrs.size());
}

// ---- GEMM -------------------------------------------------------------------------
double gemm_gflops(sy::Device& d, int64_t M, int64_t N, int64_t K, bool ta, bool tb) {
  DevBuf C(d, size_t(M * N * 4)), A(d, size_t(M * K * 4)), B(d, size_t(K * N * 4));
  upload_random(d, A, size_t(M * K), 1);
  upload_random(d, B, size_t(K * N), 2);
  sy::Instr ins = instr(sy::Kernel::gemm, {{0, uint64_t(M * N * 4)}, {1, uint64_t(M * K * 4)},
                                           {2, uint64_t(K * N * 4)}});
  int64_t* i = ins.params.i;
  i[0] = M, i[1] = N, i[2] = K, i[3] = ta, i[4] = tb;
  ins.params.f[0] = 1.f;
  double flop = 2.0 * double(M) * double(N) * double(K);
  int reps = int(std::clamp(2e9 / flop, 1.0, 50.0));
  if (d.info().backend != "cpu") reps = int(std::clamp(2e8 / flop, 1.0, 50.0));
  auto p = program(ins, reps, 3);
  std::vector<sy::Binding> bind = {{C.b, 0}, {A.b, 0}, {B.b, 0}};
  return flop / per_launch(d, p, bind) * 1e-9;
}

void bench_gemm(const std::vector<sy::Device*>& devs) {
  std::printf("\n## GEMM (GFLOP/s)\n%-34s", "shape");
  for (auto* d : devs) std::printf(" %12s", d->str().c_str());
  std::printf("\n");
  struct Case { const char* name; int64_t M, N, K; bool ta, tb; };
  std::vector<Case> cases;
  std::vector<int64_t> sizes = quick ? std::vector<int64_t>{256, 1024} : std::vector<int64_t>{256, 512, 1024, 2048};
  static char names[8][32];
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::snprintf(names[s], sizeof names[s], "square %lld", (long long)sizes[s]);
    cases.push_back({names[s], sizes[s], sizes[s], sizes[s], false, false});
  }
  // The MLP of the acceptance run (784-256-128-10, batch 128), layer 1.
  cases.push_back({"mlp fwd  Y=XW^T  128x256x784", 128, 256, 784, false, true});
  cases.push_back({"mlp bwd  dX=dYW  128x784x256", 128, 784, 256, false, false});
  cases.push_back({"mlp bwd  dW=dY^TX 256x784x128", 256, 784, 128, true, false});
  cases.push_back({"mlp fwd  Y=XW^T  128x10x128", 128, 10, 128, false, true});
  for (auto& c : cases) {
    std::printf("%-34s", c.name);
    for (auto* d : devs) std::printf(" %12.1f", gemm_gflops(*d, c.M, c.N, c.K, c.ta, c.tb));
    std::printf("\n");
    std::fflush(stdout);
  }
}

// ---- elementwise and reductions -----------------------------------------------------
void bench_elementwise(const std::vector<sy::Device*>& devs) {
  std::printf("\n## Elementwise and reductions (GB/s, bytes read + written)\n%-34s", "op");
  for (auto* d : devs) std::printf(" %12s", d->str().c_str());
  std::printf("\n");
  const int64_t n = quick ? (4 << 20) : (16 << 20);
  const int64_t rows = 4096, cols = n / rows;
  struct Case { std::string name; std::function<double(sy::Device&)> run; };
  std::vector<Case> cases;
  cases.push_back({"add " + std::to_string(n >> 20) + "M f32", [&](sy::Device& d) {
    DevBuf o(d, size_t(n * 4)), a(d, size_t(n * 4)), b(d, size_t(n * 4));
    upload_random(d, a, size_t(n), 1);
    upload_random(d, b, size_t(n), 2);
    auto ins = instr(sy::Kernel::binary, {{0, uint64_t(n * 4)}, {1, uint64_t(n * 4)}, {2, uint64_t(n * 4)}});
    int64_t* i = ins.params.i;
    i[0] = 1, i[1] = 1, i[2] = 1, i[3] = n, i[7] = 1, i[11] = 1;
    auto p = program(ins, 4, 3);
    return 3.0 * double(n) * 4 / per_launch(d, p, {{o.b, 0}, {a.b, 0}, {b.b, 0}}) * 1e-9;
  }});
  cases.push_back({"relu " + std::to_string(n >> 20) + "M f32", [&](sy::Device& d) {
    DevBuf o(d, size_t(n * 4)), a(d, size_t(n * 4));
    upload_random(d, a, size_t(n), 1);
    auto ins = instr(sy::Kernel::unary, {{0, uint64_t(n * 4)}, {1, uint64_t(n * 4)}});
    ins.params.op = int32_t(sy::Unary::relu);
    ins.params.i[0] = n;
    auto p = program(ins, 4, 2);
    return 2.0 * double(n) * 4 / per_launch(d, p, {{o.b, 0}, {a.b, 0}}) * 1e-9;
  }});
  cases.push_back({"sum rows " + std::to_string(rows) + "x" + std::to_string(cols), [&](sy::Device& d) {
    DevBuf o(d, size_t(rows * 4)), a(d, size_t(n * 4));
    upload_random(d, a, size_t(n), 1);
    auto ins = instr(sy::Kernel::reduce_sum, {{0, uint64_t(rows * 4)}, {1, uint64_t(n * 4)}});
    ins.params.i[0] = rows, ins.params.i[1] = cols, ins.params.i[2] = 1;
    ins.params.f[0] = 1.f;
    auto p = program(ins, 4, 2);
    return double(n) * 4 / per_launch(d, p, {{o.b, 0}, {a.b, 0}}) * 1e-9;
  }});
  cases.push_back({"sum cols " + std::to_string(rows) + "x" + std::to_string(cols), [&](sy::Device& d) {
    DevBuf o(d, size_t(cols * 4)), a(d, size_t(n * 4));
    upload_random(d, a, size_t(n), 1);
    auto ins = instr(sy::Kernel::reduce_sum, {{0, uint64_t(cols * 4)}, {1, uint64_t(n * 4)}});
    ins.params.i[0] = 1, ins.params.i[1] = rows, ins.params.i[2] = cols;
    ins.params.f[0] = 1.f;
    auto p = program(ins, 4, 2);
    return double(n) * 4 / per_launch(d, p, {{o.b, 0}, {a.b, 0}}) * 1e-9;
  }});
  cases.push_back({"softmax " + std::to_string(rows) + "x" + std::to_string(cols), [&](sy::Device& d) {
    DevBuf o(d, size_t(n * 4)), a(d, size_t(n * 4));
    upload_random(d, a, size_t(n), 1);
    auto ins = instr(sy::Kernel::softmax, {{0, uint64_t(n * 4)}, {1, uint64_t(n * 4)}});
    ins.params.i[0] = rows, ins.params.i[1] = cols;
    auto p = program(ins, 4, 2);
    return 2.0 * double(n) * 4 / per_launch(d, p, {{o.b, 0}, {a.b, 0}}) * 1e-9;
  }});
  cases.push_back({"adam update " + std::to_string(n >> 20) + "M", [&](sy::Device& d) {
    DevBuf w(d, size_t(n * 4)), m(d, size_t(n * 4)), v(d, size_t(n * 4)), g(d, size_t(n * 4)), s(d, 256);
    for (auto* b : {&w, &m, &v, &g}) upload_random(d, *b, size_t(n), 3);
    float one = 1.f;
    d.upload(s.b, 0, &one, 4);
    auto ins = instr(sy::Kernel::adam_update, {{0, uint64_t(n * 4)}, {1, uint64_t(n * 4)}, {2, uint64_t(n * 4)},
                                               {3, uint64_t(n * 4)}, {4, 4}});
    ins.params.i[0] = n;
    float f[5] = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.f};
    std::copy(f, f + 5, ins.params.f);
    auto p = program(ins, 2, 5);
    return 7.0 * double(n) * 4 / per_launch(d, p, {{w.b, 0}, {m.b, 0}, {v.b, 0}, {g.b, 0}, {s.b, 0}}) * 1e-9;
  }});
  for (auto& c : cases) {
    std::printf("%-34s", c.name.c_str());
    for (auto* d : devs) std::printf(" %12.2f", c.run(*d));
    std::printf("\n");
    std::fflush(stdout);
  }
}

// ---- transfers --------------------------------------------------------------------------
void bench_transfers(const std::vector<sy::Device*>& devs) {
  std::vector<size_t> sizes_mib = quick ? std::vector<size_t>{1, 64} : std::vector<size_t>{1, 4, 16, 64, 256};
  std::printf("\n## Transfers (GB/s)\n%-10s %12s", "size", "host memcpy");
  std::vector<std::string> cols;
  for (auto* d : devs) {
    if (d->info().backend == "cpu") continue;
    std::string mode;
    for (auto& [k, v] : d->info().properties)
      if (k == "memory") mode = v.substr(0, v.find(' '));
    cols.push_back(d->str() + " " + mode);
    std::printf(" %24s %24s %18s", (cols.back() + " up").c_str(), (cols.back() + " down").c_str(),
                (d->str() + " pinned up").c_str());
  }
  std::printf("\n");
  for (size_t mb : sizes_mib) {
    size_t bytes = mb << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    double tm = time_median([&] { std::memcpy(dst.data(), src.data(), bytes); });
    std::printf("%-10s %12.2f", (std::to_string(mb) + " MiB").c_str(), double(bytes) / tm * 1e-9);
    for (auto* d : devs) {
      if (d->info().backend == "cpu") continue;
      DevBuf b(*d, bytes);
      double up = time_median([&] {
        d->upload(b.b, 0, src.data(), bytes);
        d->synchronize();
      });
      double down = time_median([&] {
        d->download(b.b, 0, dst.data(), bytes);
        d->synchronize();
      });
      // From pinned host memory (allocate_host): a device-side copy.
      double pinned = 0;
      if (sy::Buffer h = d->allocate_host(bytes)) {
        std::memcpy(d->host_pointer(h), src.data(), bytes);
        double t = time_median([&] {
          d->copy(h, 0, b.b, 0, bytes);
          d->synchronize();
        });
        pinned = double(bytes) / t * 1e-9;
        d->release(h);
      }
      std::printf(" %24.2f %24.2f %18.2f", double(bytes) / up * 1e-9, double(bytes) / down * 1e-9, pinned);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
}

// ---- dispatch overhead ------------------------------------------------------------------
void bench_dispatch(const std::vector<sy::Device*>& devs) {
  std::printf("\n## Dispatch overhead (us)\n%-34s", "case");
  for (auto* d : devs) std::printf(" %12s", d->str().c_str());
  std::printf("\n");
  for (int reps : {1, 100}) {
    std::printf("%-34s", reps == 1 ? "1 launch: execute + synchronize" : "per launch, 100 in one program");
    for (auto* d : devs) {
      DevBuf o(*d, 256);
      auto ins = instr(sy::Kernel::fill, {{0, 4}});
      ins.params.i[0] = 1;
      auto p = program(ins, reps, 1);
      std::printf(" %12.2f", per_launch(*d, p, {{o.b, 0}}) * 1e6);
    }
    std::printf("\n");
  }
}

bool want(const std::string& only, const char* what) {
  return only.empty() || ("," + only + ",").find(std::string(",") + what + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  std::string names, only;
  bool reexec = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--devices" && i + 1 < argc) names = argv[++i];
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--no-reexec") reexec = false;
    else {
      std::fprintf(stderr, "usage: switchyard_bench [--devices cpu,vulkan:0] [--quick] "
                           "[--only gemm,elementwise,transfer,dispatch] [--no-reexec]\n");
      return 2;
    }
  }
  try {
    std::vector<sy::Device*> devs;
    if (names.empty()) {
      devs = sy::devices();
    } else {
      for (size_t s = 0; s <= names.size();) {
        size_t e = names.find(',', s);
        if (e == std::string::npos) e = names.size();
        devs.push_back(&sy::device(names.substr(s, e - s)));
        s = e + 1;
      }
    }
    std::printf("# switchyard_bench%s\n", quick ? " --quick" : "");
    for (auto* d : devs) std::printf("# %-10s %s\n", d->str().c_str(), d->info().name.c_str());
    if (want(only, "gemm")) bench_gemm(devs);
    if (want(only, "elementwise")) bench_elementwise(devs);
    if (want(only, "dispatch")) bench_dispatch(devs);
    if (want(only, "transfer")) {
      bench_transfers(devs);
      bool has_vulkan = std::any_of(devs.begin(), devs.end(), [](sy::Device* d) { return d->info().backend == "vulkan"; });
      const char* forced = std::getenv("SWITCHYARD_VK_FORCE_STAGING");
      if (reexec && has_vulkan && !(forced && *forced && std::string(forced) != "0")) {
        std::fflush(stdout);
        if (pid_t pid = fork(); pid == 0) {
          setenv("SWITCHYARD_VK_FORCE_STAGING", "1", 1);
          std::vector<std::string> args = {"/proc/self/exe", "--only", "transfer", "--no-reexec"};
          if (quick) args.push_back("--quick");
          std::string vk;
          for (auto* d : devs)
            if (d->info().backend == "vulkan") vk += (vk.empty() ? "" : ",") + d->str();
          args.push_back("--devices");
          args.push_back(vk);
          std::vector<char*> av;
          for (auto& s : args) av.push_back(s.data());
          av.push_back(nullptr);
          execv("/proc/self/exe", av.data());
          _exit(127);
        } else if (pid > 0) {
          int st = 0;
          waitpid(pid, &st, 0);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "switchyard_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
