// SPDX-License-Identifier: BSD-3-Clause
// Checkpoints: model, optimizer, the epoch to resume at (the loader's
// position: its shuffle and augmentation are a function of seed and epoch),
// within it the loader's state when the checkpoint is taken mid-epoch, and
// the history so far, in one torch archive.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "classifier/pictures.h"

namespace classifier {

struct CheckpointState {
  std::string model_name;
  int64_t num_classes = 0;
  int64_t next_epoch = 0;  // the first epoch not yet trained
  uint64_t seed = 0;
  std::vector<EpochRecord> history;
  std::vector<double> step_losses;  // every training step's loss
  // Mid-epoch only (else empty / zero): ringloader::LoaderState as JSON
  // text, and the running figures of epoch `next_epoch` so far.
  std::string loader_state;
  double epoch_loss_sum = 0;
  int64_t epoch_correct = 0, epoch_seen = 0;
};

// Written to `path + ".tmp"` and renamed, so a crash never leaves half a file.
void save_checkpoint(const std::string& path, torch::nn::Module& model,
                     torch::optim::Optimizer& optimizer,
                     const CheckpointState& state);

// Loads into `model` and `optimizer` (which must match the checkpoint's) and
// returns the state. Throws classifier::UsageError with the reason.
CheckpointState load_checkpoint(const std::string& path,
                                torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer,
                                const std::string& expected_model,
                                int64_t expected_classes, torch::Device device);

}  // namespace classifier
