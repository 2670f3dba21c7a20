// SPDX-License-Identifier: MIT
// The switchyard command: list devices, train an MLP on Fashion-MNIST, evaluate
// and run saved models, inspect safetensors files.
#include "switchyard/switchyard.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench.h"
#include "cnn.h"
#include "mlp.h"
#include "switchyard/backend/device.h"
#include "switchyard/backend/files.h"
#include "switchyard/backend/platform.h"
#include "switchyard/distributed.h"
#include "switchyard/profile.h"
#include "trainer.h"
#include "vit.h"

namespace sy = switchyard;

namespace {

// A figure with `digits` decimals, for JSON lines people read too.
double rounded(double v, int digits) {
  double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

double peak_rss_mb() { return double(sy::platform::peak_resident_bytes()) / (1024.0 * 1024.0); }

int cmd_devices(bool as_json) {
  if (as_json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (auto& b : sy::backends()) {
      if (b.devices.empty())
        out.push_back({{"backend", b.name}, {"available", false}, {"reason", b.reason}});
      else if (!b.reason.empty())  // devices left out (a GPU this build has no kernels for)
        out.push_back({{"backend", b.name}, {"left_out", b.reason}});
      for (auto& d : b.devices) {
        auto& i = d->info();
        nlohmann::ordered_json props = nlohmann::ordered_json::object();
        for (auto& [k, v] : i.properties) props[k] = v;
        out.push_back({{"device", i.str()},
                       {"backend", i.backend},
                       {"available", true},
                       {"name", i.name},
                       {"type", sy::device_type_name(i.type)},
                       {"memory_bytes", i.memory_bytes},
                       {"properties", props}});
      }
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::printf("%-10s %-14s %-10s %s\n", "DEVICE", "TYPE", "MEMORY", "NAME / STATUS");
  for (auto& b : sy::backends()) {
    if (b.devices.empty())
      std::printf("%-10s %-14s %-10s unavailable: %s\n", b.name.c_str(), "-", "-",
                  b.reason.c_str());
    for (auto& d : b.devices) {
      auto& i = d->info();
      char mem[32];
      std::snprintf(mem, sizeof mem, "%.1f GiB", double(i.memory_bytes) / (1 << 30));
      std::string extra;
      for (auto& [k, v] : i.properties) extra += "  " + k + "=" + v;
      std::printf("%-10s %-14s %-10s %s%s\n", i.str().c_str(), sy::device_type_name(i.type), mem,
                  i.name.c_str(), extra.c_str());
    }
    if (!b.devices.empty() && !b.reason.empty())
      std::printf("%-10s %-14s %-10s left out: %s\n", b.name.c_str(), "-", "-", b.reason.c_str());
  }
  std::printf("auto -> %s\n", sy::device("auto").str().c_str());
  return 0;
}

struct TrainFlags {
  sy::models::TrainConfig cfg;
  std::string hidden = "256,128";
  bool json = false, prof = false;
  std::string trace;
  int losses = 0;       // first step losses to report
  std::string devices;  // --devices cpu,vulkan:0
  std::string save_dtype = "f32";
};

// Leaves the process group however cmd_train ends.
struct ProcessGroup {
  explicit ProcessGroup(bool on) {
    if (on) sy::distributed::init_process_group("mpi");
  }
  ~ProcessGroup() {  // on an error with other ranks, the job is ended instead (main)
    if (std::uncaught_exceptions() == 0 || sy::distributed::get_world_size() == 1)
      sy::distributed::destroy_process_group();
  }
};

// Per kernel of `dev`'s profile rows: bytes its arguments span and FLOPs
// per launch (the training steps after warm-up, TrainResult), and the
// achieved GB/s and GFLOP/s over the device time the profile measured.
std::string kernel_rates(const std::vector<sy::profile::Event>& events, sy::BackendDevice& dev,
                         const sy::models::TrainResult& t) {
  const sy::profile::Summary s = sy::profile::summarize(events);
  if (t.step_launches.size() != size_t(sy::kNumKernels)) return "";
  std::string out = "kernel rates on " + dev.str() +
                    " per launch in a training step (bytes its arguments span, FLOPs) and achieved"
                    " over its device time\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-24s %9s %12s %12s %10s %10s\n", "name", "launches",
                "MB/launch", "MFLOP/launch", "GB/s", "GFLOP/s");
  out += line;
  for (const auto& r : s.rows) {
    if (r.device != dev.str() || r.track != sy::profile::Track::kernel || r.total_ms <= 0) continue;
    for (size_t k = 0; k < size_t(sy::kNumKernels); ++k) {
      if (r.name != sy::kernel_name(sy::Kernel(k))) continue;
      const uint64_t n = t.step_launches[k];
      if (n == 0) break;
      const double bytes = double(t.step_bytes[k]) / double(n);
      const double flops = double(t.step_flops[k]) / double(n);
      const double secs = r.total_ms * 1e-3 / double(r.count);  // per launch
      char gf[32] = "-";
      if (flops > 0) std::snprintf(gf, sizeof gf, "%.2f", flops / secs * 1e-9);
      std::snprintf(line, sizeof line, "%-24s %9llu %12.3f %12.1f %10.2f %10s\n", r.name.c_str(),
                    (unsigned long long)n, bytes * 1e-6, flops * 1e-6, bytes / secs * 1e-9, gf);
      out += line;
      break;
    }
  }
  return out;
}

int cmd_train(TrainFlags& f) {
  sy::models::TrainConfig& cfg = f.cfg;
  ProcessGroup group(cfg.distributed);
  // Only rank 0 prints (and saves): the others train silently.
  const bool quiet = sy::distributed::get_rank() != 0;
  if (quiet) f.json = true;
  cfg.record_losses = std::max(cfg.record_losses, f.losses);
  cfg.hidden = f.hidden.empty() ? std::vector<int64_t>{} : sy::models::parse_sizes(f.hidden);
  cfg.save_dtype = f.save_dtype == "bf16"  ? sy::DType::bf16
                   : f.save_dtype == "f16" ? sy::DType::f16
                                           : sy::DType::f32;
  const bool json = f.json, prof = (f.prof || !f.trace.empty()) && !quiet;  // rank 0's
  const std::string& trace = f.trace;
  bool tty = !json && sy::platform::stderr_is_terminal();
  if (!f.devices.empty()) cfg.devices = sy::bench::split(f.devices, "--devices");
  SY_CHECK(cfg.balance == "equal" || !cfg.devices.empty(), "train",
           "expected --devices with --balance ", cfg.balance,
           " (it splits DataParallel's batches)");
  // The device whose counters --profile reads: DataParallel's first.
  const std::string main_device = cfg.devices.empty() ? cfg.device : cfg.devices.front();
  std::string where =
      sy::device(main_device).str() + " (" + sy::device(main_device).info().name + ")";
  if (cfg.devices.size() > 1) {
    where = "";
    for (const std::string& d : cfg.devices)
      where += (where.empty() ? "" : ", ") + sy::device(d).str();
    where = "DataParallel over " + where + " (balance " + cfg.balance + ")";
  }
  if (cfg.distributed)
    where += ", rank 0 of " + std::to_string(sy::distributed::get_world_size()) +
             " (DistributedDataParallel over MPI)";
  if (!json)
    std::printf("device %s  model %s  epochs %d  batch %lld  opt %s  lr %g\n", where.c_str(),
                cfg.model.c_str(), cfg.epochs, (long long)cfg.batch, cfg.opt.c_str(),
                double(cfg.lr));
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
      std::printf("%s\n", nlohmann::ordered_json{{"epoch", s.epoch},
                                                 {"loss", rounded(s.loss, 6)},
                                                 {"test_acc", rounded(s.test_acc, 4)},
                                                 {"samples_per_s", rounded(s.samples_per_s, 1)}}
                              .dump()
                              .c_str());
    else
      std::printf("epoch %d/%d  loss %.4f  test_acc %.4f  samples/s %.0f  (%.1f s)\n", s.epoch,
                  cfg.epochs, s.loss, s.test_acc, s.samples_per_s, s.seconds);
    std::fflush(stdout);
  };
  sy::BackendDevice& dev = sy::backend_device(main_device);  // for its launch counters
  sy::Counters before = dev.counters();
  if (prof) {
    sy::profile::clear();
    sy::profile::set_enabled(true);
  }
  auto r = sy::models::train_fashion_mnist(cfg, progress, epoch_done);
  for (auto& w : r.warnings)
    std::fprintf(stderr, "switchyard: skipped a damaged checkpoint: %s\n", w.c_str());
  nlohmann::ordered_json launches = nlohmann::ordered_json::object();
  if (prof) {
    dev.synchronize();  // every timestamp read back
    auto events = sy::profile::events();
    // With --json, stdout holds JSON lines only; the table goes to stderr.
    FILE* table = json ? stderr : stdout;
    std::fprintf(table, "%s", sy::profile::format_summary(sy::profile::summarize(events)).c_str());
    if (!trace.empty()) {
      sy::profile::write_chrome_trace(trace, events);
      std::fprintf(table, "profile: wrote Chrome trace %s (%zu events)\n", trace.c_str(),
                   events.size());
    }
    std::fflush(table);
    // What the device ran, by its own counters: the trace's kernel events
    // must match these.
    for (size_t k = 0; k < size_t(sy::kNumKernels); ++k)
      if (uint64_t n = dev.counters().launches_by_kernel[k] - before.launches_by_kernel[k])
        launches[sy::kernel_name(sy::Kernel(k))] = n;
    // What each kernel moved and computed in a step against its device time
    // in the steps: achieved GB/s and GFLOP/s, to hold against the device's
    // ceilings (`switchyard bench --ops gemm,elementwise`).
    std::fprintf(table, "%s", kernel_rates(events, dev, r).c_str());
    std::fflush(table);
  }
  nlohmann::ordered_json line = {{"device", r.device},
                                 {"model", cfg.model},
                                 {"epochs", cfg.epochs},
                                 {"batch", cfg.batch},
                                 {"opt", cfg.opt},
                                 {"lr", rounded(cfg.lr, 9)},
                                 {"train_samples", r.train_samples},
                                 {"steps", r.steps},
                                 {"train_samples_per_s", rounded(r.train_samples_per_s, 1)},
                                 {"test_acc", rounded(r.test_acc, 4)},
                                 {"final_loss", rounded(r.final_loss, 6)},
                                 {"launches_per_step", rounded(r.launches_per_step, 1)},
                                 {"kernel_mb_per_step", rounded(r.kernel_bytes_per_step / 1e6, 2)},
                                 {"peak_rss_mb", rounded(peak_rss_mb(), 1)},
                                 {"precision", cfg.precision},
                                 {"peak_device_mb", rounded(r.peak_device_bytes / 1e6, 2)},
                                 {"world_size", r.world_size},
                                 {"devices", r.devices}};
  if (r.devices.size() > 1 || r.world_size > 1) {
    line["shard"] = r.shard;
    line["comm_s"] = rounded(r.comm_seconds, 4);
    line["exposed_comm_s"] = rounded(r.exposed_comm_seconds, 4);
    line["bytes_per_step"] = rounded(r.bytes_per_step, 0);
  }
  if (cfg.precision == "fp16") {
    line["skipped_steps"] = r.skipped_steps;
    line["loss_scale"] = r.loss_scale;
  }
  if (!r.resumed_from.empty()) {
    line["resumed_from"] = r.resumed_from;
    line["first_epoch"] = r.first_epoch;
  }
  if (!cfg.save.empty()) {
    line["saved"] = cfg.save;
    line["save_dtype"] = sy::dtype_name(cfg.save_dtype);
  }
  if (prof) line["kernel_launches"] = launches;
  if (f.losses > 0) {
    auto& l = line["first_losses"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < r.first_losses.size() && i < size_t(f.losses); ++i)
      l.push_back(double(r.first_losses[i]));  // as float: every digit, for exact comparisons
  }
  if (!quiet) std::printf("%s\n", line.dump().c_str());
  return 0;
}

struct EvalFlags {
  std::string model, device = "auto", data = sy::data::FashionMNIST::kDefaultDir;
  int64_t limit = -1;
  bool json = false;
};

int cmd_eval(const EvalFlags& f) {
  sy::Device& dev = sy::device(f.device);
  sy::models::register_vit_modules();  // a vit's model file names its block types
  auto model = sy::nn::load(f.model, dev);
  model->train(false);
  sy::data::FashionMNIST test(f.data, false, f.limit);
  auto r = sy::models::evaluate(*model, test, dev);
  if (!f.json)
    std::printf("model %s on %s: test_acc %.4f  test_loss %.4f  (%lld samples)\n", f.model.c_str(),
                dev.str().c_str(), r.accuracy, r.loss, (long long)r.samples);
  std::printf("%s\n", nlohmann::ordered_json{{"model", f.model},
                                             {"device", dev.str()},
                                             {"test_samples", r.samples},
                                             {"test_acc", rounded(r.accuracy, 4)},
                                             {"test_loss", rounded(r.loss, 6)}}
                          .dump()
                          .c_str());
  return 0;
}

struct PredictFlags {
  std::string model, input, output, device = "auto";
};

int cmd_predict(const PredictFlags& f) {
  sy::Device& dev = sy::device(f.device);
  sy::models::register_vit_modules();  // a vit's model file names its block types
  auto model = sy::nn::load(f.model, dev);
  model->train(false);
  sy::Tensor x = sy::data::read_samples(f.input);
  sy::NoGradGuard no_grad;
  std::string out;
  const int64_t n = x.size(0), batch = 1000;
  for (int64_t b = 0; b < n; b += batch) {
    auto pred =
        sy::argmax((*model)(x.slice(b, std::min(n, b + batch)).to(dev))).to_vector<int32_t>();
    for (int32_t p : pred) out += std::to_string(p) + "\n";
  }
  if (f.output.empty() || f.output == "-")
    std::fwrite(out.data(), 1, out.size(), stdout);
  else
    sy::files::write_atomic(f.output, out, "predict");
  std::fprintf(stderr, "predict: %lld predictions from %s\n", (long long)n, f.input.c_str());
  return 0;
}

int cmd_inspect(const std::string& path, bool as_json) {
  sy::SafetensorsFile file(path);
  const bool checked = file.verify();
  nlohmann::ordered_json out = {{"file", path}, {"checksum", checked ? "verified" : "none"}};
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (auto& [k, v] : file.metadata()) meta[k] = v;
  out["metadata"] = meta;
  nlohmann::ordered_json ts = nlohmann::ordered_json::array();
  uint64_t bytes = 0;
  for (auto& e : file.entries()) {
    ts.push_back(
        {{"name", e.name}, {"dtype", e.dtype}, {"shape", e.shape}, {"bytes", e.end - e.begin}});
    bytes += e.end - e.begin;
  }
  out["tensors"] = ts;
  if (as_json) {
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%s: %zu tensors, %llu bytes of data, checksum %s\n", path.c_str(),
              file.entries().size(), (unsigned long long)bytes, checked ? "verified" : "none");
  for (auto& [k, v] : file.metadata())
    std::printf("  %s = %s\n", k.c_str(),
                v.size() > 120 ? (v.substr(0, 117) + "...").c_str() : v.c_str());
  for (auto& e : file.entries())
    std::printf("  %-32s %-5s %-16s %llu bytes\n", e.name.c_str(), e.dtype.c_str(),
                sy::shape_str(e.shape).c_str(), (unsigned long long)(e.end - e.begin));
  return 0;
}

struct TuneFlags {
  std::string device;
  std::string models = "mlp,cnn,vit";
  int64_t batch = 128;
  int reps = 10;
};

// `switchyard tune`: one training step of each bundled model at the
// training batch, and a forward pass at the evaluation batch (1000), note
// the device's GEMM shapes; each is then timed in every variant and the
// winners are kept for later runs (backend: tune_begin / tune_finish).
int cmd_tune(const TuneFlags& f) {
  sy::Device& dev = sy::device(f.device);
  sy::BackendDevice& d = sy::backend_of(dev);
  std::vector<std::string> names;
  std::stringstream ss(f.models);
  for (std::string m; std::getline(ss, m, ',');)
    if (!m.empty()) names.push_back(m);
  SY_CHECK(!names.empty(), "tune", "expected --models from mlp, cnn, vit, found '", f.models, "'");
  for (const std::string& m : names)
    SY_CHECK(m == "mlp" || m == "cnn" || m == "vit", "tune",
             "expected --models from mlp, cnn, vit, found '", m, "'");
  SY_CHECK(f.batch >= 1, "tune", "expected --batch of at least 1, found ", f.batch);
  d.tune_begin();
  for (const std::string& m : names) {
    sy::manual_seed(1);
    std::shared_ptr<sy::nn::Module> model = m == "cnn"   ? sy::models::cnn()
                                            : m == "vit" ? sy::models::vit()
                                                         : sy::models::mlp({784, 256, 128, 10});
    model->to(dev);
    sy::optim::Adam opt(model->parameters(), 1e-3f);
    sy::Tensor x = sy::rand({f.batch, 784}, sy::Options(dev));
    sy::Tensor y = sy::randint(0, 10, {f.batch}, sy::Options(dev));
    opt.zero_grad();
    sy::Tensor loss = sy::cross_entropy((*model)(x), y);
    loss.backward();
    opt.step();
    (void)loss.item();
    sy::NoGradGuard no_grad;
    (void)sy::argmax((*model)(sy::rand({1000, 784}, sy::Options(dev)))).to_vector<int32_t>();
    std::fprintf(stderr, "tune: %s's shapes noted on %s\n", m.c_str(), dev.str().c_str());
  }
  for (const std::string& line : d.tune_finish(f.reps)) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

// The whole CLI. With execute = false it stops after parsing (what the
// fuzz target for the option parser runs): 0 when the command line parsed.
int cli_main(int argc, char** argv, bool execute) {
  CLI::App app{"Switchyard: train and run neural networks on the CPU, Vulkan and CUDA",
               "switchyard"};
  app.require_subcommand(1, 1);

  bool devices_json = false;
  CLI::App* devices =
      app.add_subcommand("devices", "list every device, and why an absent backend is absent");
  devices->add_flag("--json", devices_json, "print JSON");

  TrainFlags tf;
  if (const char* e = std::getenv("SWITCHYARD_DEVICE"); e && *e) tf.cfg.device = e;
  CLI::App* train = app.add_subcommand("train", "train an MLP or a CNN on Fashion-MNIST");
  train
      ->add_option("--device", tf.cfg.device,
                   "cpu, vulkan[:N], cuda[:N] or auto (default: $SWITCHYARD_DEVICE, else auto)")
      ->capture_default_str();
  train->add_option("--devices", tf.devices,
                    "DataParallel: split each batch over these devices, e.g. cpu,vulkan:0");
  train
      ->add_option("--balance", tf.cfg.balance,
                   "DataParallel's split: equal, or measured (by each device's speed on the "
                   "first steps)")
      ->check(CLI::IsMember({"equal", "measured"}))
      ->capture_default_str();
  train->add_flag("--distributed", tf.cfg.distributed,
                  "train over the processes of an MPI job (mpirun -np N switchyard train "
                  "--distributed): each rank on its share of every batch, on its device "
                  "(--device resolved by local rank)");
  train->add_option("--epochs", tf.cfg.epochs, "passes over the training set")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  train->add_option("--batch", tf.cfg.batch, "samples per step")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24))
      ->capture_default_str();
  train->add_option("--lr", tf.cfg.lr, "learning rate")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  train->add_option("--opt", tf.cfg.opt, "optimizer: sgd (momentum 0.9), adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))
      ->capture_default_str();
  train
      ->add_option(
          "--model", tf.cfg.model,
          "mlp, cnn (three conv blocks with batch norm) or vit (a small vision transformer)")
      ->check(CLI::IsMember({"mlp", "cnn", "vit"}))
      ->capture_default_str();
  train->add_option("--hidden", tf.hidden, "the MLP's hidden layer sizes, e.g. 256,128")
      ->capture_default_str();
  train->add_option("--seed", tf.cfg.seed, "seed of the initialization and the shuffle")
      ->capture_default_str();
  train->add_option("--data", tf.cfg.data_dir, "directory of the Fashion-MNIST IDX files")
      ->capture_default_str();
  train->add_option("--limit", tf.cfg.limit, "use the first N training samples (default: all)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  train
      ->add_option("--test-limit", tf.cfg.test_limit,
                   "evaluate on the first N test samples (default: all)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  train
      ->add_option("--losses", tf.losses,
                   "report the first N step losses in the final line (\"first_losses\"), to "
                   "compare devices step for step")
      ->check(CLI::Range(0, 1000000));
  train->add_flag("--json", tf.json, "print JSON lines only");
  train->add_flag_callback(
      "--keep-going", [&tf] { tf.cfg.stop_on_nonfinite = false; },
      "train on when the loss becomes NaN or infinite (default: stop with an error)");
  train->add_flag("--profile", tf.prof,
                  "device time per kernel and transfer kind (also: SWITCHYARD_PROFILE=1)");
  train->add_option(
      "--trace", tf.trace,
      "write a Chrome trace (Perfetto, chrome://tracing) of the run; implies --profile");

  train->add_option("--save", tf.cfg.save,
                    "FILE.safetensors: save the final model there; DIR: a checkpoint after every "
                    "epoch, and DIR/model.safetensors");
  train
      ->add_option("--precision", tf.cfg.precision,
                   "fp32; bf16 (autocast: GEMMs and convolutions in bf16); fp16 (autocast in f16 "
                   "with dynamic loss scaling). Weights and optimizer stay f32")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  train
      ->add_option("--save-dtype", tf.save_dtype,
                   "the model file's weights: f32, or bf16/f16 (half the size)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  train->add_option("--resume", tf.cfg.resume,
                    "continue from the newest good checkpoint in DIR (and keep saving there)");

  EvalFlags ef;
  if (const char* e = std::getenv("SWITCHYARD_DEVICE"); e && *e) ef.device = e;
  CLI::App* eval = app.add_subcommand("eval", "test accuracy and loss of a saved model");
  eval->add_option("--model", ef.model, "a model file (train --save)")->required();
  eval->add_option("--device", ef.device, "cpu, vulkan[:N], cuda[:N] or auto")
      ->capture_default_str();
  eval->add_option("--data", ef.data, "directory of the Fashion-MNIST IDX files")
      ->capture_default_str();
  eval->add_option("--limit", ef.limit, "use the first N test samples (default: all)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  eval->add_flag("--json", ef.json, "print the JSON line only");

  PredictFlags pf;
  if (const char* e = std::getenv("SWITCHYARD_DEVICE"); e && *e) pf.device = e;
  CLI::App* predict = app.add_subcommand("predict", "the class of every sample in a file");
  predict->add_option("--model", pf.model, "a model file (train --save)")->required();
  predict
      ->add_option("--input", pf.input,
                   "samples: IDX images (.idx or .idx.gz, normalized as in training) or .npy "
                   "(float32 features as they are, or uint8 images)")
      ->required();
  predict->add_option("--output", pf.output, "where to write one class per line (default: stdout)");
  predict->add_option("--device", pf.device, "cpu, vulkan[:N], cuda[:N] or auto")
      ->capture_default_str();

  std::string inspect_path;
  bool inspect_json = false;
  CLI::App* inspect =
      app.add_subcommand("inspect", "the tensors and metadata of a safetensors file");
  inspect->add_option("file", inspect_path, "a .safetensors file")->required();
  inspect->add_flag("--json", inspect_json, "print JSON");

  TuneFlags tuf;
  CLI::App* tune = app.add_subcommand(
      "tune", "time the GEMM variants on the bundled models' shapes and keep the fastest");
  tune->add_option("--device", tuf.device, "the device to tune, e.g. vulkan:0")->required();
  tune->add_option("--models", tuf.models, "the models whose shapes to time: mlp,cnn,vit");
  tune->add_option("--batch", tuf.batch, "the training batch (default 128)");
  tune->add_option("--reps", tuf.reps, "timed runs per variant (default 10)");

  // bench parses its own options (bench/bench.cpp): everything after the
  // word goes to it, --help included.
  CLI::App* bench = app.add_subcommand(
      "bench", "compare devices on kernels, transfers and the MLP (bench --help)");
  bench->prefix_command();
  bench->set_help_flag();

  // No command: the commands, on stderr; `switchyard help`: the same on stdout.
  if (argc < 2 || std::string(argv[1]) == "help") {
    std::fputs(app.help().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    std::string where = "switchyard";
    for (CLI::App* sub : {devices, train, eval, predict, inspect, tune})
      if (sub->parsed()) where += " " + sub->get_name();
    // A misspelt flag: name the closest one this command knows.
    for (CLI::App* sub : {devices, train, eval, predict, inspect, tune}) {
      if (!sub->parsed()) continue;
      std::vector<std::string> known;
      for (const CLI::Option* o : sub->get_options())
        for (const std::string& n : o->get_lnames()) known.push_back("--" + n);
      for (const std::string& extra : sub->remaining())
        if (std::string c = sy::bench::closest_option(extra, known); !c.empty())
          msg += " (did you mean " + c + "?)";
    }
    std::fprintf(stderr, "%s: %s\nsee: %s --help\n", where.c_str(), msg.c_str(), where.c_str());
    return 2;
  }
  if (!execute) return 0;
  try {
    if (devices->parsed()) return cmd_devices(devices_json);
    if (train->parsed()) return cmd_train(tf);
    if (eval->parsed()) return cmd_eval(ef);
    if (predict->parsed()) return cmd_predict(pf);
    if (inspect->parsed()) return cmd_inspect(inspect_path, inspect_json);
    if (tune->parsed()) return cmd_tune(tuf);
    return sy::bench::run(bench->remaining());
  } catch (const std::exception& e) {
    if (sy::distributed::get_world_size() > 1) {
      // One rank failed: say which, and end the job, so that the others do
      // not wait for it until their timeout.
      std::fprintf(stderr, "switchyard (rank %d of %d): %s\n", sy::distributed::get_rank(),
                   sy::distributed::get_world_size(), e.what());
      std::fflush(stderr);
      sy::distributed::abort_group(1);
    }
    std::fprintf(stderr, "switchyard: %s\n", e.what());
    return 1;
  }
}

#ifndef SWITCHYARD_CLI_NO_MAIN
int main(int argc, char** argv) { return cli_main(argc, argv, true); }
#endif
