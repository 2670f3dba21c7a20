// SPDX-License-Identifier: MIT
// The Fashion-MNIST training loop, written the way a PyTorch user writes it.
#include "trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "checkpoint.h"
#include "cnn.h"
#include "mlp.h"
#include "switchyard/amp.h"
#include "switchyard/backend/device.h"
#include "switchyard/distributed.h"
#include "switchyard/error.h"
#include "switchyard/optim.h"
#include "switchyard/parallel.h"
#include "switchyard/profile.h"
#include "vit.h"

namespace switchyard::models {

static std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name,
                                                        std::vector<Tensor> params, float lr) {
  if (name == "sgd")
    return std::make_unique<optim::SGD>(std::move(params),
                                        optim::SGDOptions{.lr = lr, .momentum = 0.9f});
  if (name == "adam") return std::make_unique<optim::Adam>(std::move(params), lr);
  if (name == "adamw") return std::make_unique<optim::AdamW>(std::move(params), lr);
  throw Error(detail::cat("[train] unknown optimizer '", name, "': expected sgd, adam or adamw"));
}

EvalResult evaluate(nn::Module& model, const data::Dataset& ds, Device& dev) {
  NoGradGuard no_grad;
  data::DataLoader loader(std::shared_ptr<const data::Dataset>(&ds, [](auto*) {}),
                          {.batch_size = 1000, .shuffle = false});
  int64_t correct = 0;
  double loss_sum = 0;
  EvalResult r;
  for (const auto& b : loader) {
    Tensor y = b.target.to(dev);
    Tensor logits = model(b.data.to(dev));
    Tensor loss = cross_entropy(logits, y);
    auto pred = argmax(logits).to_vector<int32_t>();
    auto truth = b.target.to_vector<int32_t>();
    for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == truth[i];
    loss_sum += double(loss.item()) * double(pred.size());
    r.samples += int64_t(pred.size());
  }
  r.accuracy = r.samples ? double(correct) / double(r.samples) : 0.0;
  r.loss = r.samples ? loss_sum / double(r.samples) : 0.0;
  return r;
}

// The settings a resumed run must share with the one that saved.
static std::string settings_json(const TrainConfig& c, const std::vector<int64_t>& sizes) {
  nlohmann::json j{{"sizes", sizes},     {"batch", c.batch}, {"opt", c.opt},
                   {"lr", double(c.lr)}, {"seed", c.seed},   {"limit", c.limit}};
  if (c.model != "mlp")
    j = {{"model", c.model},   {"batch", c.batch}, {"opt", c.opt},
         {"lr", double(c.lr)}, {"seed", c.seed},   {"limit", c.limit}};
  if (c.precision != "fp32") j["precision"] = c.precision;  // fp32 runs' checkpoints unchanged
  return j.dump();
}

static std::shared_ptr<nn::Module> make_model(const TrainConfig& c,
                                              const std::vector<int64_t>& sizes) {
  if (c.model == "mlp") return mlp(sizes);
  if (c.model == "cnn") return cnn();
  if (c.model == "vit") return vit();
  throw Error(detail::cat("[train] unknown model '", c.model, "': expected mlp, cnn or vit"));
}

// A distributed rank's device. A backend ("cuda", "vulkan", or "auto": the
// backend auto picks) gives the local_rank-th of its devices (wrapping when
// ranks outnumber them); a named device ("cuda:1", "cpu") is that device.
static Device& rank_device(const std::string& name) {
  const bool indexed = name.find(':') != std::string::npos;
  Device& first = device(name);  // the name checked; auto resolved
  if (indexed || first.info().backend == "cpu") return first;
  std::vector<Device*> pool;
  for (Device* d : devices())
    if (d->info().backend == first.info().backend) pool.push_back(d);
  return *pool[size_t(distributed::get_local_rank()) % pool.size()];
}

static bool is_model_file(const std::string& path) {
  const std::string ext = ".safetensors";
  return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

TrainResult train_fashion_mnist(const TrainConfig& cfg, const Progress& progress,
                                const EpochDone& epoch_done) {
  using clock = std::chrono::steady_clock;
  SY_CHECK(cfg.epochs >= 1, "train", "expected epochs >= 1, found ", cfg.epochs);
  SY_CHECK(cfg.batch >= 1, "train", "expected batch >= 1, found ", cfg.batch);
  SY_CHECK(cfg.lr > 0, "train", "expected lr > 0, found ", cfg.lr);
  SY_CHECK(cfg.limit == -1 || cfg.limit >= 1, "train",
           "expected limit >= 1 (or -1 for all samples), found ", cfg.limit);
  auto train = std::make_shared<data::FashionMNIST>(cfg.data_dir, true, cfg.limit);
  data::FashionMNIST test(cfg.data_dir, false, cfg.test_limit);
  // Zero steps would report a loss of 0 that no model reached.
  SY_CHECK(train->size() >= 1, "train", "expected at least one training sample in ", cfg.data_dir,
           ", found an empty training set");

  manual_seed(cfg.seed);
  std::vector<int64_t> sizes{784};
  sizes.insert(sizes.end(), cfg.hidden.begin(), cfg.hidden.end());
  sizes.push_back(10);
  auto model = make_model(cfg, sizes);  // built on the cpu, then moved, as in PyTorch
  // `net` runs the steps: the model, or DataParallel over it (which holds
  // the model on its first device and gathers outputs there).
  std::shared_ptr<nn::Module> net = model;
  std::shared_ptr<nn::DataParallel> dp;
  if (!cfg.devices.empty()) {
    SY_CHECK(cfg.balance == "equal" || cfg.balance == "measured", "train",
             "expected balance equal or measured, found '", cfg.balance, "'");
    nn::DataParallelOptions o;
    o.balance = cfg.balance == "measured" ? nn::DataParallelOptions::Balance::measured
                                          : nn::DataParallelOptions::Balance::equal;
    dp = std::make_shared<nn::DataParallel>(model, cfg.devices, o);
    net = dp;
  }
  const bool dist = cfg.distributed;
  // A process group the caller made for other work does not shard this run.
  const int rank = dist ? distributed::get_rank() : 0;
  const int world = dist ? distributed::get_world_size() : 1;
  if (dist) {
    SY_CHECK(distributed::is_initialized(), "train",
             "expected distributed::init_process_group() before a distributed run (the CLI's "
             "--distributed does it), found no process group");
    SY_CHECK(!dp, "train", "expected either devices (DataParallel) or distributed, found both");
  }
  SY_CHECK(cfg.precision == "fp32" || cfg.precision == "bf16" || cfg.precision == "fp16", "train",
           "expected precision fp32, bf16 or fp16, found '", cfg.precision, "'");
  // (DataParallel runs under autocast too: its replicas' forwards are
  // recorded on this thread, inside the scope; test_parallel.cpp's
  // DataParallel.AutocastRunsEveryReplicaInItsDtype.)
  // The autocast dtype; f32 for none (std::optional<DType> here trips
  // GCC 12's -Wmaybe-uninitialized).
  const DType low = cfg.precision == "bf16"   ? DType::bf16
                    : cfg.precision == "fp16" ? DType::f16
                                              : DType::f32;
  std::optional<GradScaler> scaler;
  if (cfg.precision == "fp16") scaler.emplace();
  Device& dev = dp ? dp->output_device() : dist ? rank_device(cfg.device) : device(cfg.device);
  if (!dp) model->to(dev);  // DataParallel holds it on its first device
  auto opt = make_optimizer(cfg.opt, model->parameters(), cfg.lr);
  // On a GPU the loader's thread puts batches in pinned memory, so moving
  // them is a device-side copy that overlaps with the queued step.
  // DataParallel moves each device's rows itself, from the host.
  bool pin = dev.info().backend != "cpu" && !dp;
  data::DataLoader loader(train, {.batch_size = cfg.batch,
                                  .shuffle = true,
                                  .seed = cfg.seed,
                                  .pin_memory = pin,
                                  .pin_device = &dev,
                                  .sampler = {.num_replicas = world, .rank = rank}});

  TrainResult r;
  r.device = dev.str();
  const std::string settings = settings_json(cfg, sizes);
  if (!cfg.resume.empty()) {
    Resumed from = load_checkpoint(cfg.resume, *model, *opt, settings, scaler ? &*scaler : nullptr);
    SY_CHECK(from.epoch < cfg.epochs, "resume", "'", from.path, "' finished epoch ", from.epoch,
             "; expected --epochs above it, found ", cfg.epochs);
    r.first_epoch = from.epoch + 1;
    r.resumed_from = from.path;
    r.warnings = from.skipped;
    loader.set_epoch(uint64_t(from.epoch));  // the shuffles the full run would see
  }
  const std::string ckpt_dir = !cfg.save.empty() && !is_model_file(cfg.save) ? cfg.save
                               : cfg.save.empty()                            ? cfg.resume
                                                                             : std::string();
  // A new run must not mix its checkpoints with another run's.
  SY_CHECK(!cfg.resume.empty() || ckpt_dir.empty() || !has_checkpoints(ckpt_dir), "train", "'",
           ckpt_dir, "' holds checkpoints of an earlier run; expected --resume ", ckpt_dir,
           " to continue it, or an empty directory");
  // Across processes: rank 0's values to every rank, then gradients
  // all-reduced in every backward.
  if (dist) net = std::make_shared<nn::DistributedDataParallel>(model);
  const distributed::CommStats comm0 = distributed::comm_stats();
  // The mean of every rank's values, weighted by its rows: what one process
  // with the whole batch reports.
  auto global_mean = [&](double sum, int64_t rows) {
    Tensor pair = from_vector(std::vector<float>{float(sum), float(rows)}, {2});
    distributed::all_reduce(pair);
    auto v = pair.to_vector<float>();
    return std::pair<double, int64_t>{v[0], int64_t(v[1])};
  };
  const bool lead = rank == 0;  // reports, evaluates and saves
  double train_seconds = 0;
  // Launches and kernel bytes of the steps after warm-up (the steps' own
  // work: evaluation and checkpoints fall outside).
  BackendDevice* counted = dp ? nullptr : &backend_of(dev);
  uint64_t counted_steps = 0, step_launches = 0, step_bytes = 0;
  r.step_launches.assign(size_t(kNumKernels), 0);
  r.step_bytes.assign(size_t(kNumKernels), 0);
  r.step_flops.assign(size_t(kNumKernels), 0);
  if (counted) counted->reset_peak();
  for (int e = r.first_epoch; e <= cfg.epochs; ++e) {
    auto t0 = clock::now();
    double loss_sum = 0;
    int64_t seen = 0, bi = 0;
    model->train(true);
    for (const auto& batch : loader) {
      profile::Span step(profile::Track::step, "train step", &dev);
      const bool count = counted && r.steps >= 2;
      const Counters c0 = count ? counted->counters() : Counters{};
      Tensor x = dp ? batch.data : batch.data.to(dev, true), y = batch.target.to(dev, true);
      opt->zero_grad();
      Tensor loss;
      {
        autocast ac(low, low != DType::f32);
        loss = cross_entropy((*net)(x), y);  // f32 under autocast (its f32 list)
      }
      if (scaler) {
        scaler->scale(loss).backward();
        scaler->step(*opt);  // skipped when a gradient overflowed
        scaler->update();
      } else {
        loss.backward();
        opt->step();
      }
      float l = loss.item();  // the step's single submission happens here
      if (count) {
        const Counters& c1 = counted->counters();
        counted_steps++;
        step_launches += c1.kernel_launches - c0.kernel_launches;
        step_bytes += c1.kernel_bytes - c0.kernel_bytes;
        for (size_t k = 0; k < size_t(kNumKernels); ++k) {
          r.step_launches[k] += c1.launches_by_kernel[k] - c0.launches_by_kernel[k];
          r.step_bytes[k] += c1.kernel_bytes_by_kernel[k] - c0.kernel_bytes_by_kernel[k];
          r.step_flops[k] += c1.kernel_flops_by_kernel[k] - c0.kernel_flops_by_kernel[k];
        }
      }
      SY_CHECK(std::isfinite(l) || !cfg.stop_on_nonfinite, "train",
               "expected a finite loss, found ", l, " at epoch ", e, ", step ", bi + 1, " on ",
               dev.str(), ": training diverged (is the learning rate ", cfg.lr,
               " too high?); --keep-going trains on regardless");
      loss_sum += double(l) * double(x.size(0));
      seen += x.size(0);
      if (int(r.first_losses.size()) < cfg.record_losses) {
        if (dist) {  // the global batch's loss (one more small all-reduce per step)
          auto [sum, rows] = global_mean(double(l) * double(x.size(0)), x.size(0));
          l = float(sum / double(rows));
        }
        r.first_losses.push_back(l);
      }
      ++r.steps;
      ++bi;
      if (progress && lead) progress(e, bi, loader.num_batches(), loss_sum / double(seen));
    }
    if (dist) std::tie(loss_sum, seen) = global_mean(loss_sum, seen);
    if (counted_steps) {
      r.launches_per_step = double(step_launches) / double(counted_steps);
      r.kernel_bytes_per_step = double(step_bytes) / double(counted_steps);
    }
    double secs = std::chrono::duration<double>(clock::now() - t0).count();
    train_seconds += secs;
    r.train_samples += seen;
    model->train(false);
    EpochStats s;
    s.epoch = e;
    s.loss = seen ? loss_sum / double(seen) : 0;
    s.seconds = secs;
    s.samples_per_s = secs > 0 ? double(seen) / secs : 0;
    // Every rank evaluates (rank 0 reports): none runs ahead into the next
    // epoch's collectives while another evaluates, whatever it takes.
    {
      autocast ac(low, low != DType::f32);
      s.test_acc = evaluate(*model, test, dev).accuracy;
    }
    r.epochs.push_back(s);
    if (!ckpt_dir.empty() && lead) {
      save_checkpoint(ckpt_dir, e, *model, *opt, settings, scaler ? &*scaler : nullptr);
      nn::save(*model, ckpt_dir + "/model.safetensors", cfg.save_dtype);
    }
    if (epoch_done && lead) epoch_done(s);
  }
  if (is_model_file(cfg.save) && lead) nn::save(*model, cfg.save, cfg.save_dtype);
  r.final_loss = r.epochs.back().loss;
  if (counted) r.peak_device_bytes = double(counted->counters().peak_bytes_in_use);
  if (scaler) r.skipped_steps = scaler->skipped_steps(), r.loss_scale = scaler->get_scale();
  r.test_acc = r.epochs.back().test_acc;
  r.train_samples_per_s = train_seconds > 0 ? double(r.train_samples) / train_seconds : 0;
  if (dp) {
    const nn::DataParallelStats st = dp->stats();
    for (Device* d : dp->devices()) r.devices.push_back(d->str());
    r.shard = st.shard;
    r.comm_seconds = st.comm_seconds;
    r.exposed_comm_seconds = st.comm_seconds;  // every move waits: none is hidden
    r.bytes_per_step = st.steps ? double(st.bytes_moved) / double(st.steps) : 0;
  } else {
    r.devices = {dev.str()};
  }
  if (dist) {
    const distributed::CommStats c = distributed::comm_stats();
    r.world_size = world;
    r.comm_seconds = c.seconds - comm0.seconds;
    r.exposed_comm_seconds = c.exposed_seconds - comm0.exposed_seconds;
    r.bytes_per_step = r.steps ? double(c.bytes - comm0.bytes) / double(r.steps) : 0;
  }
  return r;
}

}  // namespace switchyard::models
