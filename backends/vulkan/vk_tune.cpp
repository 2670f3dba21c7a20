// SPDX-License-Identifier: MIT
// `switchyard tune` on Vulkan: the GEMM shapes the bundled models ran are
// timed in every candidate variant (vk_gemm.h's gemm_candidates), and the
// fastest are kept in a file next to the pipeline cache, keyed by vendor,
// device, driver version and pipelineCacheUUID; a device reads it when it
// is set up (load_tuning) and takes its entries over the model's choice.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "switchyard/backend/files.h"
#include "switchyard/error.h"
#include "switchyard/settings.h"
#include "vk_device.h"
#include "vk_gemm.h"

namespace switchyard::vk_impl {
namespace {

constexpr const char* kMagic = "switchyard vulkan gemm tuning 1";

// The device line: who the timings are for.
std::string device_line(const Physical& p) {
  std::string uuid;
  char h[3];
  for (uint8_t b : p.props.pipelineCacheUUID) std::snprintf(h, sizeof h, "%02x", b), uuid += h;
  char s[96];
  std::snprintf(s, sizeof s, "device %08x %08x %08x ", p.props.vendorID, p.props.deviceID,
                p.props.driverVersion);
  return cat(s, uuid);
}

bool same_key(const LaunchConfig::Tuned& a, const LaunchConfig::Tuned& b) {
  return a.m == b.m && a.n == b.n && a.k == b.k && a.batch == b.batch && a.ta == b.ta &&
         a.tb == b.tb;
}

}  // namespace

std::string tuning_path(const Physical& p) {
  if (const char* e = std::getenv("SWITCHYARD_VK_GEMM_TUNING"); e && *e) return e;
  std::string dir;
  if (const char* pc = std::getenv("SWITCHYARD_VK_PIPELINE_CACHE"); pc && *pc) {
    const std::string file = pc;
    const size_t slash = file.rfind('/');
    dir =
        slash == std::string::npos ? std::string(".") : file.substr(0, std::max<size_t>(slash, 1));
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = cat(x, "/switchyard");
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = cat(home, "/.cache/switchyard");
  } else {
    return "";
  }
  char id[64];
  std::snprintf(id, sizeof id, "%08x_%08x_%08x", p.props.vendorID, p.props.deviceID,
                p.props.driverVersion);
  return cat(dir, "/vk_gemm_tuning_", id, ".txt");
}

std::vector<LaunchConfig::Tuned> load_tuning(const Physical& p, const std::string& path) {
  std::vector<LaunchConfig::Tuned> out;
  if (path.empty() || !disk_cache_enabled()) return out;
  std::ifstream f(path);
  std::string line;
  // Another driver's or device's file, or not one of ours: not read.
  if (!std::getline(f, line) || line != kMagic) return out;
  if (!std::getline(f, line) || line != device_line(p)) return out;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string word;
    LaunchConfig::Tuned t{};
    int ta = 0, tb = 0;
    if (in >> word >> t.m >> t.n >> t.k >> t.batch >> ta >> tb >> t.set >> t.splits &&
        word == "gemm" && t.m > 0 && t.n > 0 && t.k > 0 && t.batch > 0 && t.set <= kLargeSet &&
        t.splits >= 1 && t.splits <= 64) {
      t.ta = ta != 0, t.tb = tb != 0;
      out.push_back(t);
    }  // a line that does not parse is skipped: the model decides that shape
  }
  return out;
}

void VulkanDevice::tune_begin() {
  std::lock_guard lock(mu_);
  ensure();
  noted_.clear();
  noting_ = true;
}

void VulkanDevice::note_shapes(const Program& prog) {
  for (const Instr& ins : prog.instrs) {
    if (ins.kernel != Kernel::gemm) continue;
    const GemmParams g = params<Kernel::gemm>(ins.params);
    const LaunchConfig::Tuned t{g.m,       g.n,       g.k, std::max<int64_t>(1, g.batch),
                                g.trans_a, g.trans_b, 0,   0};
    if (t.m > 0 && t.n > 0 && t.k > 0 &&
        std::none_of(noted_.begin(), noted_.end(), [&](const auto& x) { return same_key(x, t); }))
      noted_.push_back(t);
  }
}

std::vector<std::string> VulkanDevice::tune_finish(int reps) {
  SY_CHECK(reps >= 1, "tune", "expected at least 1 timed run per variant, found ", reps);
  std::vector<LaunchConfig::Tuned> shapes;
  int forced_set = -1;
  uint32_t forced_splits = 0;
  {
    std::lock_guard lock(mu_);
    ensure();
    noting_ = false;
    shapes.swap(noted_);
    forced_set = c_.lc.gemm_forced_set;
    forced_splits = c_.lc.gemm_forced_splits;
  }
  SY_CHECK(!shapes.empty(), "tune", "expected GEMMs run on ", str(),
           " since tune_begin(), found none");
  std::vector<std::string> lines;
  std::vector<LaunchConfig::Tuned> won;
  static uint64_t next_id = uint64_t(1) << 50;  // apart from the scheduler's and bench's
  for (const LaunchConfig::Tuned& s : shapes) {
    // The product packed (each operand its own, no bias): its variants'
    // relative speed does not depend on the strides the model used.
    GemmParams g{.m = s.m,
                 .n = s.n,
                 .k = s.k,
                 .trans_a = s.ta,
                 .trans_b = s.tb,
                 .batch = s.batch,
                 .stride_a = s.batch > 1 ? s.m * s.k : 0,
                 .stride_b = s.batch > 1 ? s.k * s.n : 0,
                 .stride_c = s.batch > 1 ? s.m * s.n : 0,
                 .alpha = 1.f};
    const size_t bytes[3] = {size_t(s.batch * s.m * s.n) * 4, size_t(s.batch * s.m * s.k) * 4,
                             size_t(s.batch * s.k * s.n) * 4};
    std::vector<Buffer> bufs;
    std::vector<Binding> bind;
    Instr ins;
    ins.kernel = Kernel::gemm;
    ins.nargs = 3;
    ins.params = g;
    struct Timed {
      GemmChoice ch;
      double us;
    };
    std::vector<Timed> timed;
    GemmChoice model;
    auto restore = [&] {
      std::lock_guard lock(mu_);
      c_.lc.gemm_forced_set = forced_set, c_.lc.gemm_forced_splits = forced_splits;
    };
    try {
      for (uint32_t a = 0; a < 3; ++a) {
        bufs.push_back(allocate(bytes[a]));
        std::vector<float> v(bytes[a] / 4);
        for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 17) - 8) * 0.01f;
        upload(bufs.back(), 0, v.data(), bytes[a]);
        bind.push_back({bufs.back(), 0});
        ins.args[a] = {a, 0, bytes[a]};
      }
      std::vector<GemmChoice> cands;
      {
        std::lock_guard lock(mu_);
        const std::vector<LaunchConfig::Tuned> keep = std::move(c_.lc.tuned);
        c_.lc.tuned.clear();
        model = choose_gemm(c_.lc, g);  // what the device does untuned
        c_.lc.tuned = keep;
        cands = gemm_candidates(c_.lc, g);
      }
      for (const GemmChoice& ch : cands) {
        {
          std::lock_guard lock(mu_);
          c_.lc.gemm_forced_set = int(ch.set);
          c_.lc.gemm_forced_splits = ch.splits;
        }
        Program prog;
        prog.id = next_id++;
        prog.num_slots = 3;
        prog.instrs = {ins};
        for (int w = 0; w < 2; ++w) execute(prog, bind), synchronize();  // compile, record
        std::vector<double> us;
        for (int r = 0; r < reps; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          execute(prog, bind);
          synchronize();
          us.push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                  .count());
        }
        std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
        timed.push_back({ch, us[us.size() / 2]});
      }
    } catch (...) {
      restore();  // then the buffers, outside the lock (release takes it)
      for (Buffer b : bufs) release(b);
      throw;
    }
    restore();
    for (Buffer b : bufs) release(b);
    const auto best = std::min_element(timed.begin(), timed.end(),
                                       [](const Timed& a, const Timed& b) { return a.us < b.us; });
    double model_us = 0;
    for (const Timed& t : timed)
      if (t.ch.set == model.set && t.ch.splits == model.splits) model_us = t.us;
    LaunchConfig::Tuned w = s;
    w.set = best->ch.set, w.splits = best->ch.splits;
    won.push_back(w);
    char head[96];
    std::snprintf(head, sizeof head, "gemm %lldx%lldx%lld%s%s", (long long)s.m, (long long)s.n,
                  (long long)s.k, s.ta ? " At" : "", s.tb ? " Bt" : "");
    std::string line = head;
    if (s.batch > 1) line += cat(" x", s.batch);
    char t[64];
    std::snprintf(t, sizeof t, " %.1f us (%.2f GFLOP/s)", best->us,
                  2e-3 * double(s.batch * s.m) * double(s.n * s.k) / best->us);
    line += cat(": ", describe(c_.lc, best->ch), ",", t, ", best of ", timed.size(), " variants");
    if (model_us > 0) {
      char m[32];
      std::snprintf(m, sizeof m, "%.1f us", model_us);
      line += cat("; the default, ", describe(c_.lc, model), ": ", m);
    }
    lines.push_back(line);
  }
  // Merged with what the file held for other shapes, written atomically
  // (not at all with disk caches off: nothing else reads or writes them).
  const std::string path = disk_cache_enabled() ? tuning_path(c_.p) : std::string();
  std::vector<LaunchConfig::Tuned> all = load_tuning(c_.p, path);
  for (const LaunchConfig::Tuned& w : won) {
    all.erase(std::remove_if(all.begin(), all.end(), [&](const auto& x) { return same_key(x, w); }),
              all.end());
    all.push_back(w);
  }
  std::string text = std::string(kMagic) + "\n" + device_line(c_.p) + "\n";
  for (const LaunchConfig::Tuned& t : all)
    text += cat("gemm ", t.m, " ", t.n, " ", t.k, " ", t.batch, " ", int(t.ta), " ", int(t.tb), " ",
                t.set, " ", t.splits, "\n");
  {
    std::lock_guard lock(mu_);
    c_.lc.tuned = all;
  }
  if (path.empty()) {
    lines.push_back(disk_cache_enabled()
                        ? "not written: no cache directory (set SWITCHYARD_VK_GEMM_TUNING=FILE)"
                        : "not written: disk caches are off (SWITCHYARD_VK_NO_PIPELINE_CACHE)");
    return lines;
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  files::write_atomic(path, text, "vulkan gemm tuning");
  lines.push_back("written to " + path);
  return lines;
}

}  // namespace switchyard::vk_impl
