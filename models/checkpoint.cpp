// SPDX-License-Identifier: MIT
// Training checkpoints (see checkpoint.h).
#include "checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "switchyard/backend/files.h"
#include "switchyard/error.h"

namespace switchyard::models {
using detail::cat;
namespace fs = std::filesystem;

namespace {

constexpr const char* kKey = "switchyard.checkpoint";
constexpr int kVersion = 1;

std::string file_of(const std::string& dir, int epoch) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-%06d.safetensors", epoch);
  return (fs::path(dir) / name).string();
}

// The epochs of the checkpoints in `dir`, newest first.
std::vector<int> epochs_in(const std::string& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    int epoch = 0, used = 0;
    if (std::sscanf(n.c_str(), "checkpoint-%d.safetensors%n", &epoch, &used) == 1 &&
        size_t(used) == n.size() && epoch >= 1)
      out.push_back(epoch);
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

NamedTensors with_prefix(const std::string& prefix, const NamedTensors& ts) {
  NamedTensors out;
  for (auto& [n, t] : ts) out.emplace_back(prefix + n, t);
  return out;
}

}  // namespace

bool has_checkpoints(const std::string& dir) { return !epochs_in(dir).empty(); }

void save_checkpoint(const std::string& dir, int epoch, const nn::Module& model,
                     const optim::Optimizer& opt, const std::string& settings,
                     const GradScaler* scaler) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  SY_CHECK(!ec, "checkpoint", "cannot create the directory '", dir, "': ", ec.message());
  const std::string path = file_of(dir, epoch);
  files::remove_stale_temporaries(path);
  NamedTensors all = with_prefix("model.", model.state_dict());
  for (auto& t : with_prefix("optimizer.", opt.state_dict())) all.push_back(t);
  if (scaler)
    for (auto& t : with_prefix("scaler.", scaler->state_dict())) all.push_back(t);
  const RandomState rng = random_state();
  nlohmann::ordered_json info = {{"version", kVersion},
                                 {"epoch", epoch},
                                 {"steps", opt.steps()},
                                 {"rng", {{"seed", rng.seed}, {"offset", rng.offset}}},
                                 {"settings", nlohmann::json::parse(settings)}};
  save_safetensors(path, all, {{kKey, info.dump()}});
  // Keep this one and the one before; older ones and dead runs' temporaries go.
  for (int e : epochs_in(dir))
    if (e < epoch - 1) fs::remove(file_of(dir, e), ec);
}

Resumed load_checkpoint(const std::string& dir, nn::Module& model, optim::Optimizer& opt,
                        const std::string& settings, GradScaler* scaler) {
  const char* op = "resume";
  std::error_code ec;
  SY_CHECK(fs::is_directory(dir, ec), op, "expected a checkpoint directory, found nothing at '",
           dir, "'");
  const std::vector<int> epochs = epochs_in(dir);
  SY_CHECK(!epochs.empty(), op, "expected checkpoint-<epoch>.safetensors files in '", dir,
           "', found none");
  const auto want = nlohmann::json::parse(settings);
  Resumed r;
  for (int epoch : epochs) {
    const std::string path = file_of(dir, epoch);
    nlohmann::json have;
    int64_t steps = 0;
    RandomState rng;
    NamedTensors model_state, opt_state, scaler_state;
    try {
      SafetensorsFile f(path);
      SY_CHECK(f.verify(), op, "'", path, "': expected a checksum (switchyard.crc32), found none");
      auto it = f.metadata().find(kKey);
      SY_CHECK(it != f.metadata().end(), op, "'", path, "': expected a checkpoint (metadata '",
               kKey, "'), found none");
      const auto info = nlohmann::json::parse(it->second);
      SY_CHECK(info.is_object() && info.value("version", 0) == kVersion &&
                   info.value("epoch", 0) == epoch,
               op, "'", path, "': expected checkpoint version ", kVersion, " of epoch ", epoch,
               ", found ", info.dump().substr(0, 200));
      steps = info.at("steps").get<int64_t>();
      SY_CHECK(steps >= 0, op, "'", path, "': expected a step count >= 0, found ", steps);
      rng = {info.at("rng").at("seed").get<uint64_t>(),
             info.at("rng").at("offset").get<uint64_t>()};
      have = info.at("settings");
      for (auto& e : f.entries()) {
        if (e.name.rfind("model.", 0) == 0)
          model_state.emplace_back(e.name.substr(6), f.tensor(e.name));
        else if (e.name.rfind("optimizer.", 0) == 0)
          opt_state.emplace_back(e.name.substr(10), f.tensor(e.name));
        else if (e.name.rfind("scaler.", 0) == 0)
          scaler_state.emplace_back(e.name.substr(7), f.tensor(e.name));
      }
    } catch (const Error& e) {  // damaged: fall back to the one before
      r.skipped.push_back(e.what());
      continue;
    } catch (const nlohmann::json::exception& e) {
      r.skipped.push_back(cat("'", path, "': its checkpoint record is not valid: ", e.what()));
      continue;
    }
    // A readable checkpoint of another run is the user's mistake, not damage.
    std::string diff;
    for (auto& [k, v] : want.items())
      if (!have.contains(k) || have[k] != v)
        diff += cat(diff.empty() ? "" : ", ", k, " ", have.contains(k) ? have[k].dump() : "unset",
                    " there, ", v.dump(), " here");
    SY_CHECK(diff.empty(), op, "'", path, "' was written by a run with other settings (", diff,
             "); resume with the same settings, or start a new directory");
    // Both loads check everything before they change anything; a state that
    // does not fit (a file that passed its checksum, so not damage) is an
    // error, after which the run stops.
    SY_CHECK(!scaler || !scaler_state.empty(), op, "'", path,
             "': expected the GradScaler's state (scaler.*) of an fp16 run, found none");
    GradScaler loaded = scaler ? *scaler : GradScaler();  // checked before the model changes
    if (scaler) loaded.load_state_dict(scaler_state);
    model.load_state_dict(model_state);
    opt.load_state_dict(opt_state, steps);
    if (scaler) *scaler = loaded;
    set_random_state(rng);
    r.epoch = epoch;
    r.path = path;
    return r;
  }
  std::string why;
  for (auto& s : r.skipped) why += "\n  " + s;
  throw Error(cat("[", op, "] expected a readable checkpoint in '", dir, "', found ", epochs.size(),
                  " damaged:", why));
}

}  // namespace switchyard::models
