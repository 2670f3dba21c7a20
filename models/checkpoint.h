// SPDX-License-Identifier: MIT
// Training checkpoints: everything a run needs to continue exactly where it
// stopped (model, optimizer state, epoch, step count, the generator's state
// and the run's settings), one safetensors file per epoch, written
// atomically, the last two kept.
#pragma once
#include <string>
#include <vector>

#include "switchyard/amp.h"
#include "switchyard/nn.h"
#include "switchyard/optim.h"

namespace switchyard::models {

// Writes DIR/checkpoint-<epoch>.safetensors (creating DIR), then removes
// checkpoints older than the previous one and temporaries that killed runs
// left. `settings` is a JSON object of the run's settings that a resume
// must match. An fp16 run's GradScaler state (scale, growth tracker) is
// saved with it.
void save_checkpoint(const std::string& dir, int epoch, const nn::Module& model,
                     const optim::Optimizer& opt, const std::string& settings,
                     const GradScaler* scaler = nullptr);

// Whether `dir` holds checkpoint files.
bool has_checkpoints(const std::string& dir);

struct Resumed {
  int epoch = 0;                     // the last finished epoch
  std::string path;                  // the checkpoint used
  std::vector<std::string> skipped;  // newer checkpoints that could not be read, and why
};

// Restores `model`, `opt` and the generator from the newest checkpoint in
// `dir` that reads back whole (its checksum verified); damaged ones are
// skipped and reported in Resumed::skipped. Throws when there is none, or
// when the checkpoint's settings differ from `settings` (listing each).
Resumed load_checkpoint(const std::string& dir, nn::Module& model, optim::Optimizer& opt,
                        const std::string& settings, GradScaler* scaler = nullptr);

}  // namespace switchyard::models
