// SPDX-License-Identifier: BSD-3-Clause
// The trainer's Loader: owns the configuration, the ring and the workers
// (or the in-process filler); publishes the plans its Epoch (epoch.h)
// computes and hands out batches in order.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "loader/data/fetch/shard_prefetcher.h"
#include "loader/data/tar/shard_starts.h"
#include "loader/ring/ring.h"
#include "loader/ring/slot_protocol.h"
#include "loader/ring/slot_validation.h"
#include "loader/trainer/device_stage.h"
#include "loader/trainer/epoch.h"
#include "loader/trainer/held_batches.h"
#include "loader/trainer/slot_releaser.h"
#include "loader/trainer/streamed_order.h"
#include "loader/trainer/worker_autotune.h"
#include "loader/trainer/worker_pool.h"
#include "loader/trainer/worker_recovery.h"
#include "loader/worker/batch_filler.h"
#include "ringloader/loader.h"

namespace ringloader {

class RINGLOADER_HIDDEN Loader::Impl {
 public:
  Impl(Dataset dataset, Pipeline pipeline, LoaderOptions options);
  Impl(ExternalWorkers workers, LoaderOptions options);
  ~Impl();
  // False in a fork child of the trainer that made this loader (its copy:
  // ~Loader leaks it, ring/process_owned.h says why). Every constructor
  // creates the ring, which records the process that made it.
  bool made_here() const { return ring_->owned_here(); }

  void set_epoch(int64_t epoch);
  void set_order(std::vector<int64_t> indices);
  void start_epoch();
  std::optional<Batch> next();
  // next() that calls `check` between bounded waits (Loader::next(check)).
  std::optional<Batch> next_checked(const Loader::WaitCheck& check);
  // Loader::put_back / batches_handed_out.
  void put_back(Batch batch);
  int64_t batches_handed_out() const { return handed_out_; }

  // Mid-epoch resume (loader_state.cc). Like size(), state_dict() waits for
  // shards still being indexed (Loader::state_dict is const, the wait only
  // fills in what the index says).
  LoaderState state_dict();
  void load_state_dict(const LoaderState& state);

  int64_t size();
  const SampleShape& shape() const { return shape_; }
  const LoaderOptions& options() const { return options_; }
  LoaderStats stats() const;
  std::vector<int> worker_pids() const;
  // internal::LoaderAccess (loader_access.h).
  const ring::Ring& ring() const { return *ring_; }
  void wait_for_held_slots() { wait_for_held_slots_ = true; }

 private:
  static LoaderOptions validate(LoaderOptions options);
  void check_tensor_rows(const Dataset& dataset, const Pipeline& pipeline) const;
  // loader_tuning.cc: ring_slots = 0 sized from the batch bytes and the
  // memory budget; after each batch handed out, the autotuner and the
  // shard prefetcher look at it; their figures in stats().
  void size_ring();
  void after_batch(const Batch& batch);
  void add_tuning_stats(LoaderStats& stats) const;
  void create_ring();
  void spawn(std::vector<std::string> command, const std::string& config_text);
  ring::RingGeometry geometry() const;
  std::optional<Batch> next_host(bool wait);
  ring::SampleRange slot_sample_range() const;
  // The epoch's plan, published a window of the order table at a time.
  uint64_t plan_window_end(uint64_t plan_cursor) const;
  uint64_t window_batches() const;  // whole batches one order table holds
  void write_plan_entries(uint64_t batches);
  void publish_more();
  std::optional<Batch> next_device();
  uint32_t wait_for(uint64_t batch_id);
  void fill_in_process(uint64_t batch_id);
  void check_timeout(uint64_t wait_start_ns) const;
  // loader_leases.cc: the FAILED batch's error, raised; a READY batch whose
  // worker-written words failed their checks, dropped (its worker killed
  // and replaced) and raised as WorkerError.
  [[noreturn]] void raise_failure(uint64_t batch_id);
  [[noreturn]] void reject_batch(uint64_t batch_id, const std::string& violation);
  // "batch 3 of epoch 1": the batch at the cursor, for messages.
  std::string where() const;
  // loader_leases.cc: frees the slot `batch_id` needs when a live batch
  // leases it (its fence waited, or the batch spilled), else waits a little
  // and throws LeaseError.
  void free_leased_slot(uint64_t batch_id, uint32_t state);
  // With wait_for_held_slots_: waits (calling wait_check_) until no live
  // batch leases `slot`.
  void wait_while_leased(ring::SlotControl& slot);
  // start_cuda_once.cc: pins the ring and fences releases, at the first
  // iteration (CUDA is never touched at construction).
  void start_cuda_once();
  std::string describe_sample(int64_t index) const;
  // Most samples an epoch's order may list (max_samples_per_epoch or the
  // sampler's), and the part of it one order table holds at a time.
  int64_t order_limit() const;
  int64_t order_window() const;
  // set_order's rules: at most order_limit(), inside the dataset.
  void check_order(const std::vector<int64_t>& indices) const;
  // loader_state.cc: what a state must match.
  void check_state_matches(const LoaderState& state) const;
  std::string options_fingerprint() const;

  LoaderOptions options_;
  worker::WorkerConfig config_;
  SampleShape shape_;
  std::shared_ptr<ring::Ring> ring_;
  std::unique_ptr<ring::SlotProtocol> protocol_;
  // Shared with every lease: hands slots back, behind fences once pinned.
  std::shared_ptr<trainer::SlotReleaser> releaser_;
  trainer::HeldBatches held_;  // host batches the caller may still hold
  bool cuda_started_ = false;
  std::unique_ptr<trainer::WorkerPool> pool_;
  std::unique_ptr<trainer::WorkerRecovery> recovery_;
  std::unique_ptr<worker::BatchFiller> in_process_;
  std::unique_ptr<trainer::WorkerAutotune> autotune_;   // kAutoWorkers only
  std::unique_ptr<data::ShardPrefetcher> prefetcher_;   // cached tar shards only
  // loader_streamed.cc: tar shards still being indexed when the loader was
  // made (TarShardOptions::index_in_background). Until the index is
  // complete, counter_ is set, dataset_size_ is 0 and the sampler is a
  // placeholder; an epoch started then grows as shards are indexed
  // (streamed_). Workers got the shard-named view (TarIndex::streamed), so
  // every order entry is written as a ShardSample, and slot indices are
  // turned back into dataset indices once shard_starts_ is known.
  std::shared_ptr<data::ShardCounter> counter_;
  Dataset source_;  // as given, when workers got the shard-named view
  bool shard_named_ = false;
  data::ShardStarts shard_starts_;  // once the index is adopted
  std::unique_ptr<trainer::StreamedOrder> streamed_;
  static std::shared_ptr<data::ShardCounter> index_to_stream(const Dataset& dataset,
                                                             const LoaderOptions& options);
  static sampler::Sampler first_sampler(const Dataset& dataset, bool streaming,
                                        const LoaderOptions& options);
  const Dataset& source() const { return shard_named_ ? source_ : config_.dataset; }
  // Waits for the index, then gives the loader its size, sampler and shard
  // starts; nothing when it has them.
  void adopt_index();
  void start_streamed_epoch();
  // Appends what indexed shards allow to a growing epoch; waits when the
  // cursor's batch is not in it yet.
  void grow_epoch(uint64_t plan_cursor, uint64_t window);
  int64_t order_entry(int64_t sample) const;
  void name_by_index(std::vector<int64_t>& indices);
  // ShardSamples of the trainer's own order from `from` on, renamed by
  // dataset index (shard_starts_ known).
  void by_index_from(std::vector<int64_t>& order, size_t from) const;
  int64_t dataset_size_ = 0;
  bool external_ = false;
  // Declared after ring_: unpinned before the ring can be unmapped, also
  // when a constructor throws half-way.
  trainer::HostPin pin_;
  std::unique_ptr<trainer::DeviceStage> device_;
  std::deque<Batch> staged_;  // on the device, not yet handed out
  // Handed out, then taken back by put_back(): the next next() returns it.
  std::optional<Batch> put_back_;
  int64_t handed_out_ = 0;  // batches next() returned, less those put back
  // Set only during next_checked(): wait_for() calls it between waits.
  const Loader::WaitCheck* wait_check_ = nullptr;
  // A leased slot next() needs is waited for, never spilled (LoaderAccess).
  bool wait_for_held_slots_ = false;

  // The epoch in progress and the next one (plan, cursor, order, resume).
  trainer::Epoch epoch_;
  uint64_t plans_published_ = 0;
  // The plan in progress, in plan-local terms (its sample i is the order's
  // first_sample + i, its batch j the epoch's offset + j).
  struct PlanProgress {
    uint64_t table = 0;
    uint64_t first_sample = 0;
    uint64_t samples = 0;
    uint64_t batches = 0;
    uint64_t published_batches = 0;
    uint64_t published_samples = 0;
  } plan_;
  mutable std::string data_hash_;      // dataset + pipeline, computed once

  uint64_t created_ns_ = 0;
  uint64_t trainer_wait_ns_ = 0;
  // When the fast path (a batch already ready) last looked for dead
  // workers: the wait loop looks only while it waits.
  uint64_t last_recovery_check_ns_ = 0;
  int64_t batches_ = 0;
  int64_t samples_ = 0;
};

}  // namespace ringloader
