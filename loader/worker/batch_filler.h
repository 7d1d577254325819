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
  void fill_samples(const ring::Claim& claim, uint64_t begin, uint64_t end,
                    uint8_t* data, int64_t* targets);
  void record_failure(ring::SlotControl& slot, const Failure& failure);

  const ring::Ring& ring_;
  ring::SlotProtocol protocol_;
  int worker_index_;
  uint64_t seed_;
  int threads_;
  data::SampleSource source_;
  transforms::CompiledPipeline pipeline_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace ringloader::worker
