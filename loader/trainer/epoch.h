// SPDX-License-Identifier: BSD-3-Clause
// The epoch in progress and the one to start next, as plain data: its
// order (the sampler's, a caller's from set_order(), or an elastic
// resume's), its plan (first batch id, batch count), the cursor, a restored
// position to skip to, and the epoch's elastic history. No side effects: it
// publishes nothing and touches no ring, so it is unit-tested alone
// (tests/unit/trainer/epoch_test.cc). The Loader (loader_impl.h) publishes
// what start() computed and moves the cursor as batches are handed out.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "loader/sampler/elastic.h"
#include "loader/sampler/sampler.h"
#include "ringloader/loader_state.h"

namespace ringloader::trainer {

class Epoch {
 public:
  // `rank` / `world_size`: this loader's, resolved.
  Epoch(sampler::Sampler sampler, int64_t rank, int64_t world_size);

  const sampler::Sampler& sampler() const { return sampler_; }
  // Batches of `samples` samples with the sampler's batching.
  int64_t batches_for(size_t samples) const;
  // Batches of the next epoch started (len(DataLoader)).
  int64_t size() const;

  // Loader::set_epoch / set_order (indices already checked).
  void set_epoch(int64_t epoch);
  void set_order(std::vector<int64_t> indices);

  // Starts the next epoch: takes its order and a restored position's skip.
  // Returns the first sample of the order the plan holds (batches skipped
  // by a restored position are never decoded). Then opened() with the plan's
  // first batch id.
  size_t start();
  // Starts the next epoch with an order that grows as its shards are
  // indexed (streamed_order.h): empty now, appended to through
  // mutable_order() and grew(), closed by end_growing(). Only full batches
  // count until then. No restored position or set_order() order may be
  // pending (the Loader adopts the full index before either).
  void start_growing();
  // The order to append to while growing, or to rename by dataset index
  // once the index arrives (same samples, same places).
  std::vector<int64_t>& mutable_order() { return order_; }
  void grew() { batch_count_ = static_cast<int64_t>(order_.size()) / batch_size_; }
  void end_growing();
  bool growing() const { return growing_; }
  // The full index arrived: the sampler it allows replaces the placeholder.
  void set_sampler(sampler::Sampler sampler) { sampler_ = std::move(sampler); }
  void opened(uint64_t first_batch);
  bool open() const { return open_; }
  void close() { open_ = false; }

  int64_t epoch() const { return epoch_; }
  int64_t cursor() const { return cursor_; }  // next batch index in the epoch
  int64_t batch_count() const { return batch_count_; }
  // Batches the plan leaves out at the front (a restored position).
  int64_t offset() const { return offset_; }
  bool done() const { return !growing_ && cursor_ >= batch_count_; }
  void advance() { ++cursor_; }
  const std::vector<int64_t>& order() const { return order_; }
  // The ring's id of batch `index` of this epoch.
  uint64_t batch_id(int64_t index) const {
    return first_batch_ + static_cast<uint64_t>(index - offset_);
  }
  // Samples the batch at the cursor holds: full batches, then what is left.
  uint32_t expected_samples() const;

  // The position for state_dict(): `not_handed_out` batches past the cursor
  // were taken from the ring but not given to the caller (staged, put back).
  // The configuration fields (seed, rank, fingerprint) are the caller's.
  void fill_state(LoaderState& state, int64_t not_handed_out) const;
  // A state loaded and not yet started: state_dict() returns it as it is.
  const std::optional<LoaderState>& loaded() const { return resume_; }
  // load_state_dict after the configuration matched: checks the saved
  // order against this sampler and makes the next epoch started resume it.
  // `check_order` validates a custom order's indices (set_order's rules).
  void load(const LoaderState& state,
            const std::function<void(const std::vector<int64_t>&)>& check_order);

 private:
  bool take_resume_order();
  int64_t take_resume_offset();

  sampler::Sampler sampler_;
  int64_t rank_;
  int64_t world_size_;
  int64_t batch_size_;

  bool open_ = false;
  int64_t next_epoch_ = 0;
  int64_t epoch_ = 0;
  uint64_t first_batch_ = 0;
  int64_t batch_count_ = 0;
  int64_t cursor_ = 0;
  std::vector<int64_t> order_;
  std::vector<int64_t> order_scratch_;  // reused: no per-epoch allocation
  std::optional<std::vector<int64_t>> pending_order_;
  bool order_is_custom_ = false;  // order_ came from set_order()
  bool growing_ = false;          // start_growing() until end_growing()
  // Batches of this epoch a restored state had consumed: the plan starts
  // after them and the cursor starts at them.
  int64_t offset_ = 0;
  std::optional<LoaderState> resume_;  // applies to the next epoch started
  // The restored epoch's earlier world sizes and this rank's first batch.
  std::vector<sampler::ElasticStage> resume_history_;
  int64_t resume_offset_ = 0;
  // The epoch in progress's earlier world sizes (elastic resume), saved in
  // state_dict() so a second resume within the epoch knows them.
  std::vector<sampler::ElasticStage> elastic_;
};

// FNV-1a of the order's bytes: stable across processes and builds.
uint64_t order_hash(const std::vector<int64_t>& order);

}  // namespace ringloader::trainer
