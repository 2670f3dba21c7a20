// The switchyard command: list devices, train an MLP on Fashion-MNIST.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench.h"
#include "mlp.h"
#include "switchyard/json.h"
#include "switchyard/profile.h"
#include "switchyard/switchyard.h"
#include "trainer.h"

namespace sy = switchyard;

namespace {

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

const char* kUsage =
    "usage: switchyard <command> [options]\n"
    "\n"
    "commands:\n"
    "  devices [--json]        list every device, and why a backend is absent\n"
    "  train [options]         train an MLP on Fashion-MNIST\n"
    "  bench [options]         compare devices on kernels, transfers and the MLP (bench --help)\n"
    "\n"
    "train options:\n"
    "  --device NAME    cpu, vulkan[:N], cuda[:N] or auto (default: $SWITCHYARD_DEVICE or auto)\n"
    "  --epochs N       (5)      --batch N   (128)     --lr X  (1e-3)\n"
    "  --opt NAME       sgd (momentum 0.9) | adam | adamw   (adam)\n"
    "  --hidden LIST    hidden layer sizes, e.g. 256,128   (256,128)\n"
    "  --seed N         (0)\n"
    "  --data DIR       Fashion-MNIST IDX files (/usr/share/datasets/fashion-mnist)\n"
    "  --limit N        use the first N training samples\n"
    "  --json           print JSON lines only\n"
    "  --profile        print device time per kernel and transfer kind (also: SWITCHYARD_PROFILE=1)\n"
    "  --trace FILE     write a Chrome trace (Perfetto, chrome://tracing) of the run; implies --profile\n";

int cmd_devices(const std::vector<std::string>& args) {
  bool json = false;
  for (auto& a : args) {
    if (a == "--json") json = true;
    else throw sy::Error("[devices] unknown option '" + a + "': expected --json");
  }
  if (json) {
    std::ostringstream o;
    o << "[";
    bool first = true;
    for (auto& b : sy::backends()) {
      if (b.devices.empty()) {
        o << (first ? "" : ",") << "{\"backend\":\"" << b.name
          << "\",\"available\":false,\"reason\":" << sy::json_quote(b.reason) << "}";
        first = false;
      }
      for (auto& d : b.devices) {
        auto& i = d->info();
        o << (first ? "" : ",") << "{\"device\":\"" << i.str() << "\",\"backend\":\"" << i.backend
          << "\",\"available\":true,\"name\":" << sy::json_quote(i.name) << ",\"type\":\""
          << sy::device_type_name(i.type) << "\",\"memory_bytes\":" << i.memory_bytes
          << ",\"properties\":{";
        for (size_t k = 0; k < i.properties.size(); ++k)
          o << (k ? "," : "") << sy::json_quote(i.properties[k].first) << ":"
            << sy::json_quote(i.properties[k].second);
        o << "}}";
        first = false;
      }
    }
    o << "]";
    std::cout << o.str() << "\n";
    return 0;
  }
  std::printf("%-10s %-14s %-10s %s\n", "DEVICE", "TYPE", "MEMORY", "NAME / STATUS");
  for (auto& b : sy::backends()) {
    if (b.devices.empty())
      std::printf("%-10s %-14s %-10s unavailable: %s\n", b.name.c_str(), "-", "-", b.reason.c_str());
    for (auto& d : b.devices) {
      auto& i = d->info();
      char mem[32];
      std::snprintf(mem, sizeof mem, "%.1f GiB", double(i.memory_bytes) / (1 << 30));
      std::string extra;
      for (auto& [k, v] : i.properties) extra += "  " + k + "=" + v;
      std::printf("%-10s %-14s %-10s %s%s\n", i.str().c_str(), sy::device_type_name(i.type), mem,
                  i.name.c_str(), extra.c_str());
    }
  }
  std::printf("auto -> %s\n", sy::device("auto").str().c_str());
  return 0;
}

int cmd_train(const std::vector<std::string>& args) {
  sy::models::TrainConfig cfg;
  if (const char* e = std::getenv("SWITCHYARD_DEVICE"); e && *e) cfg.device = e;
  bool json = false, prof = false;
  std::string trace;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw sy::Error("[train] option " + a + " expects a value");
      return args[++i];
    };
    auto number = [&](const std::string& v, auto parse) {
      try {
        size_t used = 0;
        auto r = parse(v, &used);
        if (used == v.size()) return r;
      } catch (const std::exception&) {
      }
      throw sy::Error("[train] option " + a + " expects a number, found '" + v + "'");
    };
    auto to_ll = [](const std::string& s, size_t* u) { return std::stoll(s, u); };
    auto to_f = [](const std::string& s, size_t* u) { return std::stof(s, u); };
    if (a == "--device") cfg.device = value();
    else if (a == "--epochs") cfg.epochs = int(number(value(), to_ll));
    else if (a == "--batch") cfg.batch = number(value(), to_ll);
    else if (a == "--lr") cfg.lr = number(value(), to_f);
    else if (a == "--opt") cfg.opt = value();
    else if (a == "--hidden") {
      std::string h = value();
      cfg.hidden = h.empty() ? std::vector<int64_t>{} : sy::models::parse_sizes(h);
    } else if (a == "--seed") cfg.seed = uint64_t(number(value(), to_ll));
    else if (a == "--data") cfg.data_dir = value();
    else if (a == "--limit") cfg.limit = number(value(), to_ll);
    else if (a == "--json") json = true;
    else if (a == "--profile") prof = true;
    else if (a == "--trace") trace = value(), prof = true;
    else throw sy::Error("[train] unknown option '" + a + "'; see switchyard --help");
  }
  bool tty = !json && isatty(STDERR_FILENO);
  if (!json)
    std::printf("device %s (%s)  epochs %d  batch %lld  opt %s  lr %g\n",
                sy::device(cfg.device).str().c_str(), sy::device(cfg.device).info().name.c_str(),
                cfg.epochs, (long long)cfg.batch, cfg.opt.c_str(), double(cfg.lr));
  std::fflush(stdout);
  auto progress = [&](int e, int64_t b, int64_t n, double loss) {
    if (!tty || (b % 10 != 0 && b != n)) return;
    int width = 30, fill = int(width * b / std::max<int64_t>(n, 1));
    std::fprintf(stderr, "\repoch %d [%s%s] %lld/%lld loss %.4f", e, std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), (long long)b, (long long)n, loss);
    if (b == n) std::fprintf(stderr, "\r%*s\r", width + 60, "");
  };
  auto epoch_done = [&](const sy::models::EpochStats& s) {
    if (json)
      std::printf("{\"epoch\":%d,\"loss\":%.6f,\"test_acc\":%.4f,\"samples_per_s\":%.1f}\n", s.epoch,
                  s.loss, s.test_acc, s.samples_per_s);
    else
      std::printf("epoch %d/%d  loss %.4f  test_acc %.4f  samples/s %.0f  (%.1f s)\n", s.epoch,
                  cfg.epochs, s.loss, s.test_acc, s.samples_per_s, s.seconds);
    std::fflush(stdout);
  };
  sy::Device& dev = sy::device(cfg.device);
  sy::Counters before = dev.counters();
  if (prof) {
    sy::profile::clear();
    sy::profile::set_enabled(true);
  }
  auto r = sy::models::train_fashion_mnist(cfg, progress, epoch_done);
  std::string launches;
  if (prof) {
    dev.synchronize();  // every timestamp read back
    auto events = sy::profile::events();
    // With --json, stdout holds JSON lines only; the table goes to stderr.
    FILE* table = json ? stderr : stdout;
    std::fprintf(table, "%s", sy::profile::format_summary(sy::profile::summarize(events)).c_str());
    if (!trace.empty()) {
      sy::profile::write_chrome_trace(trace, events);
      std::fprintf(table, "profile: wrote Chrome trace %s (%zu events)\n", trace.c_str(), events.size());
    }
    std::fflush(table);
    // What the device ran, by its own counters: the trace's kernel events
    // must match these.
    for (size_t k = 0; k < size_t(sy::Kernel::count_); ++k)
      if (uint64_t n = dev.counters().launches_by_kernel[k] - before.launches_by_kernel[k])
        launches += std::string(launches.empty() ? "" : ",") + "\"" + sy::kernel_name(sy::Kernel(k)) +
                    "\":" + std::to_string(n);
    launches = ",\"kernel_launches\":{" + launches + "}";
  }
  std::printf(
      "{\"device\":\"%s\",\"epochs\":%d,\"batch\":%lld,\"opt\":\"%s\",\"lr\":%g,"
      "\"train_samples\":%lld,\"steps\":%lld,\"train_samples_per_s\":%.1f,\"test_acc\":%.4f,"
      "\"final_loss\":%.6f,\"peak_rss_mb\":%.1f%s}\n",
      r.device.c_str(), cfg.epochs, (long long)cfg.batch, cfg.opt.c_str(), double(cfg.lr),
      (long long)r.train_samples, (long long)r.steps, r.train_samples_per_s, r.test_acc,
      r.final_loss, peak_rss_mb(), launches.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  try {
    if (cmd == "devices") return cmd_devices(args);
    if (cmd == "train") return cmd_train(args);
    if (cmd == "bench") {
      if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
        std::fputs(sy::bench::kUsage, stdout);
        return 0;
      }
      return sy::bench::run(args);
    }
    std::fprintf(stderr, "switchyard: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "switchyard: %s\n", e.what());
    return 1;
  }
}
