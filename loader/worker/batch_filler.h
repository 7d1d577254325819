// SPDX-License-Identifier: BSD-3-Clause
// Producing one batch: for each of its samples, read, decode and run the
// pipeline straight into the sample's place in the ring slot, then publish
// the slot READY (or FAILED with the first failing sample named). Shared by
// worker processes and the trainer's in-process mode (num_workers = 0), so
// both write the same bytes.
#pragma once

#include <memory>
#include <string>

#include "loader/data/sample_source.h"
#include "loader/ring/ring.h"
#include "loader/ring/slot_protocol.h"
#include "loader/worker/worker_config.h"
#include "transforms/compiled_pipeline.h"

namespace ringloader::worker {

// With on_error = skip, the dataset index that stands in for `sample` after
// `attempt` (1, 2, ...) failed loads: a pure function of (seed, epoch,
// sample, attempt), so the epoch stays deterministic whatever the worker
// count, and the batch stays full-sized.
int64_t substitute_sample(uint64_t seed, uint64_t epoch, int64_t sample,
                          int attempt, int64_t dataset_size);
// Substitutes tried for one bad sample before its batch fails after all.
inline constexpr int kMaxSubstitutes = 16;

class BatchFiller {
 public:
  // `worker_index` names the filler in errors and picks its WorkerControl
  // for timings; the trainer's in-process filler uses index 0 (no workers).
  BatchFiller(const WorkerConfig& config, const ring::Ring& ring,
              int worker_index);
  ~BatchFiller();

  // Fills the claimed batch, whose slot the caller has acquired (FILLING),
  // and publishes it. Never throws for bad samples: they become FAILED.
  void fill(const ring::Claim& claim);

 private:
  struct Failure;
  struct Scratch;
  struct ThreadScratch;
  void fill_samples(const ring::Claim& claim, uint64_t begin, uint64_t end,
                    uint32_t slot_index);
  // Loads `sample` (or, with skip_bad_samples, its substitutes) into the
  // sample's place; returns the index actually used. Throws on failure.
  int64_t load_one(const ring::Claim& claim, int64_t sample,
                   ThreadScratch& scratch, uint8_t* destination,
                   int64_t& target);
  void run_one(const ring::Claim& claim, int64_t sample,
               ThreadScratch& scratch, uint8_t* destination, int64_t& target);
  void report_skip(int64_t sample, int64_t substitute, const std::string& why);
  void record_failure(ring::SlotControl& slot, const Failure& failure);
  void publish_fetch_counts();

  const ring::Ring& ring_;
  ring::SlotProtocol protocol_;
  int worker_index_;
  ring::WorkerControl& control_;
  uint64_t seed_;
  bool skip_bad_samples_;
  int threads_;
  data::SampleSource source_;
  transforms::CompiledPipeline pipeline_;
  std::unique_ptr<Scratch> scratch_;
  uint64_t fetches_published_ = 0;  // shard cache figures already added
  uint64_t bytes_published_ = 0;
};

}  // namespace ringloader::worker
