// SPDX-License-Identifier: BSD-3-Clause
// The Loader: a DataLoader whose workers write batches straight into a ring
// of shared memory and whose iterator hands them out without copying.
//
//   auto dataset = ringloader::Dataset::image_folder("/data/train");
//   ringloader::LoaderOptions options;
//   options.batch_size = 64;
//   options.num_workers = 4;
//   ringloader::Loader loader(dataset, pipeline, options);
//   for (int epoch = 0; epoch < 10; ++epoch) {
//     loader.set_epoch(epoch);
//     for (ringloader::Batch& batch : loader) {
//       train_step(batch.data, batch.target);  // tensors alias the ring
//     }
//   }
//
// Each batch's tensors alias one ring slot. The slot goes back to the workers
// when the last tensor that aliases it is destroyed (a lease), so the ring is
// fixed at construction: ring_slots batches. A loop that drops its batches
// never copies them. Code that keeps batches (a list of every batch, stored
// outputs) is served too: when next() needs a slot that a kept batch still
// holds, that batch (the oldest held) is spilled: its bytes are copied once
// into private memory and its storage's data pointer swapped, so every
// tensor and view of it follows, and the slot goes back to the workers
// (LoaderStats::spilled_batches counts them). Spilling runs on the thread
// calling next(): a held host batch must not be read or written by another
// thread while next() runs. Pointers taken from a batch (data_ptr(),
// from_blob views, DLPack exports) do not follow a spill; tensors do.
// held_batches = kRaise throws LeaseError instead of spilling.
#pragma once

#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "ringloader/dataset.h"
#include "ringloader/epoch_order.h"
#include "ringloader/errors.h"
#include "ringloader/export.h"
#include "ringloader/external.h"
#include "ringloader/loader_state.h"
#include "ringloader/options.h"
#include "ringloader/transforms.h"

namespace ringloader {

namespace internal {
struct LoaderAccess;  // the library's own components (loader/trainer/loader_access.h)
}  // namespace internal

// One batch. `data` is [N, C, H, W] (CHW samples) or [N, H, W, C] (HWC
// samples) and aliases the ring slot; `target` is int64 [N], a copy (so
// keeping labels never holds a slot).
struct RINGLOADER_EXPORT Batch {
  torch::Tensor data;
  torch::Tensor target;
  int64_t epoch = 0;
  int64_t index = 0;  // batch index within the epoch
  // Dataset indices of the samples, in order.
  std::vector<int64_t> sample_indices;
};

// Where time went, summed over the loader's life. Worker figures are summed
// over workers (so they can exceed wall time).
struct RINGLOADER_EXPORT LoaderStats {
  int64_t batches = 0;
  int64_t samples = 0;
  double wall_s = 0;         // since construction
  double read_s = 0;         // reading files
  double decode_s = 0;       // decoding images
  double transform_s = 0;    // running the pipeline into the slot
  double slot_wait_s = 0;    // workers waiting for a free slot
  double trainer_wait_s = 0; // the trainer waiting for a ready batch (stall)
  int workers = 0;
  int ring_slots = 0;
  size_t ring_bytes = 0;
  // Of ring_bytes, the pages actually allocated: less when slots are sized
  // virtually (a Python dataset's slots hold batches of any size, and
  // commit memory as batches are written into them).
  size_t ring_resident_bytes = 0;
  bool ring_pinned = false;   // cudaHostRegister succeeded
  int64_t device_batches = 0; // batches copied to a GPU
  int64_t skipped_samples = 0; // bad samples replaced (OnError::kSkip)
  int64_t worker_restarts = 0; // dead or hung workers replaced
  int64_t redone_batches = 0;  // batches re-done after their worker was lost
  int64_t spilled_batches = 0; // held batches copied out of the ring
  // Tar shards fetched into the shard cache by this loader (its workers and
  // its prefetcher; indexing at Dataset::tar_shards is not counted), and
  // their bytes.
  int64_t shard_fetches = 0;
  uint64_t shard_bytes_fetched = 0;
  // num_workers = kAutoWorkers: what was decided and why, in order
  // ("batch 24: 1 -> 2 workers (stall 62%, 1.4 idle cores, 830 samples/s)").
  std::vector<std::string> autotune_decisions;
  std::string to_string() const;
};

// Threads. A Loader is not thread-safe: one thread at a time calls its
// methods (below, "the trainer thread": any one thread, the same or another
// after synchronising with the last call). Two threads that share a Loader
// need their own lock. The exception is what it hands out: a Batch and its
// tensors may be copied, moved and destroyed on any thread (the slot's
// release is thread-safe), and `data` may be read there, but not while the
// trainer thread is inside next(), which may spill a held batch (see the top
// of this file). Threads the Loader starts (the worker watch, shard
// prefetch) never call user code.
//
// Ownership. The Loader owns the ring (a memfd mapping) and its worker
// processes; its destructor cancels the epoch in progress, stops the workers
// and waits for them. A batch's tensors share ownership of the ring, so they
// stay valid after the Loader is destroyed (their slots are then never
// reused). Datasets and pipelines are copied in at construction.
class RINGLOADER_EXPORT Loader {
 public:
  // Trainer thread. Validates everything here (OptionError / IoError),
  // creates the ring and spawns the workers, which live until the Loader is
  // destroyed.
  Loader(Dataset dataset, Pipeline pipeline, LoaderOptions options);
  // Samples made by external workers (see external.h); batches' `data` is
  // the raw slot. Needs num_workers > 0.
  Loader(ExternalWorkers workers, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Trainer thread. Like DistributedSampler.set_epoch: the next iteration uses
  // this epoch's shuffle and augmentation. Without a call, each iteration
  // advances it.
  void set_epoch(int64_t epoch);

  // Trainer thread. Replaces the built-in sampler for the next epoch started:
  // its batches take these dataset indices in this order (like passing a sampler
  // to torch's DataLoader). Throws OptionError for an index outside the dataset
  // or more than max_samples_per_epoch indices.
  void set_order(std::vector<int64_t> indices);

  // Trainer thread. The position between batches: the epoch in progress and how
  // many of its batches were handed out (batches staged on a GPU but not yet
  // handed out do not count), or the next epoch and 0 when none is in progress.
  LoaderState state_dict() const;
  // Trainer thread. Makes the next epoch started be `state.epoch`, skipping
  // (never decoding) its first `state.batches_consumed` batches; an epoch the
  // state saw to its end is skipped whole (the next is state.epoch + 1).
  // set_epoch() with another epoch afterwards drops the position. Throws
  // OptionError when the state belongs to another configuration (seed, dataset,
  // batch size, shuffle, drop_last, rank, world_size, pipeline), naming what
  // differs. A state of another world size (or rank) resumes elastically: this
  // rank's order for the rest of the epoch is its share of the samples no rank
  // consumed (see LoaderState); later epochs are this world size's. Orders from
  // set_order() cannot move to another world size (OptionError).
  void load_state_dict(const LoaderState& state);
  // The states of all ranks (LoaderState::merge, then as above).
  void load_state_dict(const std::vector<LoaderState>& states);

  // Trainer thread, as every method (they read state next() changes).
  // Batches per epoch (len(DataLoader)).
  int64_t size() const;
  const SampleShape& sample_shape() const;
  const LoaderOptions& options() const;
  LoaderStats stats() const;
  // PIDs of the live worker processes.
  std::vector<int> worker_pids() const;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;

    Iterator() = default;
    Batch& operator*() { return current_; }
    Batch* operator->() { return &current_; }
    Iterator& operator++();
    bool operator==(const Iterator& other) const {
      return done() == other.done();
    }
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    friend class Loader;
    explicit Iterator(Loader* loader);
    bool done() const { return loader_ == nullptr; }
    Loader* loader_ = nullptr;
    Batch current_;
  };

  // Trainer thread. Starts an epoch. Starting a new one abandons the previous
  // epoch's remaining batches (they are cancelled, not decoded).
  Iterator begin();
  Iterator end() { return Iterator(); }

  // Trainer thread. For callers that pull batches instead of iterating
  // (bindings, custom loops): begin_epoch() starts an epoch like begin() without taking its
  // first batch; next() returns the next batch, or nullopt at the epoch's end.
  void begin_epoch();
  std::optional<Batch> next();

  // Called by next(check) while it waits for a batch that is not ready yet.
  using WaitCheck = std::function<void()>;
  // Longest time between two calls of a WaitCheck while next() waits.
  static constexpr double kWaitCheckInterval_s = 0.02;
  // Like next(), but while it waits (and only then) it calls `check` about
  // every kWaitCheckInterval_s, on the calling thread, between two bounded
  // waits: never inside a recovery step or with a slot half-leased. The check
  // may throw (bindings throw the host language's pending signal, e.g.
  // KeyboardInterrupt): the exception leaves next() and the Loader is as
  // before the call, so the next next() returns the same batch, none lost or
  // skipped, and begin_epoch() abandons the epoch as usual. Same thread rules
  // as next(); `check` is not kept after the call returns.
  std::optional<Batch> next(const WaitCheck& check);

  // Trainer thread. Takes back `batch`, the one the last next() returned,
  // as if it had not been handed out: the next next() returns it again and
  // state_dict() does not count it. For bindings whose caller can be
  // interrupted (a signal's exception, Ctrl-C) after next() took a batch but
  // before the caller got it: the batch is neither lost nor skipped. At most
  // one batch is held back (Error otherwise); a new epoch drops it.
  void put_back(Batch batch);
  // Trainer thread. Batches next() has returned over the Loader's life, less
  // those put back. A binding that counts what reached its caller compares
  // the two to tell that a batch was lost on the way (it then refuses to go
  // on rather than skip it silently).
  int64_t batches_handed_out() const;

  class Impl;

 private:
  friend struct internal::LoaderAccess;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringloader
