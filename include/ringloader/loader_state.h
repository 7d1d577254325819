// SPDX-License-Identifier: BSD-3-Clause
// LoaderState: a Loader's position between two batches, as plain data (no
// torch), with its JSON form for checkpoints and the merge of all ranks'
// states for an elastic resume.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringloader/epoch_order.h"
#include "ringloader/export.h"

namespace ringloader {

// Where a Loader is in its epochs, between two batches: enough for a fresh
// Loader with the same configuration to go on with the remaining batches of
// the epoch, byte for byte, then the next epochs as usual (like torchdata's
// StatefulDataLoader). Plain data; to_json() / from_json() for checkpoints.
//
// Elastic resume (docs/distributed.md): a state saved at world size W also
// restores into a Loader of world size W' != W. Ranks run in lockstep, so
// the samples the whole job consumed follow from (seed, epoch, W, the
// batches each rank took, `elastic`): the W' ranks split what is left of
// the epoch, every sample of it is delivered once (padding aside) and
// their batch counts are equal. One rank's state is enough when all ranks
// took the same number of batches (lockstep); merge() the states of all
// ranks to record each rank's own count.
struct RINGLOADER_EXPORT LoaderState {
  static constexpr int kVersion = 2;
  int version = kVersion;
  int64_t epoch = 0;             // the epoch in progress, or the next one
  int64_t batches_consumed = 0;  // batches of `epoch` already handed out
  int64_t batches_in_epoch = 0;
  // The configuration the position is only meaningful for.
  uint64_t seed = 0;
  int64_t dataset_size = 0;
  // The saver's rank and world size.
  int64_t rank = 0;
  int64_t world_size = 1;
  // batch_size, shuffle, drop_last and a hash of the dataset description
  // and pipeline, as text (num_workers is not in it: bytes do not depend on
  // it, so a job may resume with other workers; nor are rank and world
  // size: a state restores into another world size).
  std::string options_fingerprint;
  // The epoch's order when it came from set_order() (a caller's sampler);
  // empty for the built-in sampler, which recomputes it from the seed.
  std::vector<int64_t> order;
  // Hash of the saver's whole order for the epoch: a resumed epoch whose
  // order differs (a sampler that cannot be reproduced) is refused.
  uint64_t order_hash = 0;
  // Earlier world sizes within `epoch` (elastic resumes), oldest first;
  // this state's own stage (world_size, batches_consumed) follows them.
  std::vector<ElasticStage> elastic;
  // Batches each rank of world_size handed out in this stage, when the
  // states of all ranks were merged; empty: every rank took
  // batches_consumed (lockstep).
  std::vector<int64_t> rank_batches;

  nlohmann::json to_json() const;
  // Throws OptionError for a malformed state or an unknown version
  // (version 1 states, saved before elastic resume, are read).
  static LoaderState from_json(const nlohmann::json& state);
  // One state from the states of all ranks of one job (any order): checks
  // that they are one world size's ranks 0..W-1, once each, at one epoch
  // and elastic history, and records each rank's batch count in
  // rank_batches. Throws OptionError naming the rank or field that
  // disagrees.
  static LoaderState merge(const std::vector<LoaderState>& states);
};

}  // namespace ringloader
