// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/loader_impl.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "loader/data/fd.h"
#include "loader/data/tables/tensor_rows.h"
#include "loader/ring/fault_point.h"
#include "loader/ring/futex.h"
#include "loader/ring/shared_region.h"
#include "loader/ring/slot_validation.h"
#include "loader/trainer/batch_lease.h"
#include "loader/trainer/distributed.h"
#include "loader/trainer/ring_sizing.h"
#include "ringloader/option_specs.h"

namespace ringloader {
namespace {

using trainer::sampler_options;

sampler::SamplerOptions with_mix(sampler::SamplerOptions out,
                                 const std::vector<MixPart>& mix) {
  out.mix = trainer::mix_streams(mix, {});
  return out;
}

int default_intra_op_threads(const LoaderOptions& options) {
  if (options.intra_op_threads > 0) return options.intra_op_threads;
  if (options.num_workers != 0) return 1;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? static_cast<int>(cores) : 1;
}

}  // namespace

// Rows are copied as they are: there is no image for a pipeline to
// transform, nor channels for the device stage to normalise.
void Loader::Impl::check_tensor_rows(const Dataset& dataset, const Pipeline& pipeline) const {
  if (!dataset.tensor_rows()) return;
  if (!pipeline.ops().empty()) {
    throw OptionError("ringloader: tensor rows are copied as they are; the pipeline must "
                      "be empty (it has " + std::to_string(pipeline.ops().size()) + " ops)");
  }
  if (!options_.device_normalize_mean.empty() || !options_.device_normalize_std.empty()) {
    throw OptionError("ringloader: device_normalize_* finishes images, not tensor rows");
  }
}

LoaderOptions Loader::Impl::validate(LoaderOptions options) {
  options = trainer::resolve_distributed(std::move(options));
  validate_loader_options(options);  // the option table's rules (option_specs.cc)
  options.intra_op_threads = default_intra_op_threads(options);
  return options;
}

Loader::Impl::Impl(Dataset dataset, Pipeline pipeline, LoaderOptions options)
    : options_(validate(std::move(options))),
      shape_(pipeline.output_shape(dataset.color_mode(), dataset.image_height(),
                                   dataset.image_width())),
      counter_(index_to_stream(dataset, options_)),
      dataset_size_(counter_ ? 0 : dataset.size()),
      epoch_(first_sampler(dataset, counter_ != nullptr, options_), options_.rank,
             options_.world_size),
      created_ns_(ring::monotonic_ns()) {
  check_tensor_rows(dataset, pipeline);
  size_ring();
  if (counter_) {
    shard_named_ = true;
    config_.dataset = dataset.shard_named_view();
    source_ = std::move(dataset);
  } else {
    config_.dataset = std::move(dataset);
  }
  config_.pipeline = std::move(pipeline);
  config_.seed = options_.seed;
  config_.intra_op_threads = options_.intra_op_threads;
  config_.worker_nice = options_.worker_nice;
  config_.max_image_pixels = options_.max_image_pixels;
  config_.skip_bad_samples = options_.on_error == OnError::kSkip;
  // A streamed view has no shard sizes to place the order in: its shards
  // are fetched by the indexer, in the first epoch's order.
  if (config_.dataset.tar_index() && config_.dataset.tar_index()->cache.enabled() &&
      !config_.dataset.tar_index()->streamed &&
      config_.dataset.tar_index()->cache.prefetch_shards > 0) {
    prefetcher_ = std::make_unique<data::ShardPrefetcher>(*config_.dataset.tar_index());
  }
  std::string executable;
  if (options_.num_workers != 0) {
    executable = trainer::WorkerPool::find_executable(options_.worker_executable);
  }
  create_ring();
  if (options_.num_workers == 0) {
    in_process_ = std::make_unique<worker::BatchFiller>(config_, *ring_, 0);
    return;
  }
  spawn({executable}, config_.to_json_text());
}

Loader::Impl::Impl(ExternalWorkers workers, LoaderOptions options)
    : options_(validate(std::move(options))),
      shape_{1, 1, static_cast<int>(workers.sample_bytes), DType::kUInt8, Layout::kHWC},
      dataset_size_(workers.dataset_size),
      external_(true),
      epoch_(sampler::Sampler(with_mix(sampler_options(workers.dataset_size, options_),
                                       workers.mix)),
             options_.rank, options_.world_size),
      created_ns_(ring::monotonic_ns()) {
  if (options_.num_workers <= 0) {
    throw OptionError("ringloader: external workers need num_workers > 0 "
                      "(kAutoWorkers is for native datasets)");
  }
  if (workers.sample_bytes == 0 || workers.sample_bytes > (uint64_t{1} << 31)) {
    throw OptionError("ringloader: external sample_bytes must be in (0, 2 GiB]");
  }
  if (options_.device != "cpu") {
    throw OptionError("ringloader: external workers' raw batches stay on the host");
  }
  if (options_.on_error != OnError::kRaise) {
    throw OptionError("ringloader: on_error=\"skip\" needs a native dataset "
                      "(a Python dataset's own __getitem__ decides what to skip)");
  }
  size_ring();
  create_ring();
  spawn(std::move(workers.command), workers.config);
}

void Loader::Impl::create_ring() {
  if (options_.device != "cpu") {
    device_ = trainer::make_device_stage(options_, shape_);
  }
  ring_ = ring::Ring::create(geometry());
  protocol_ = std::make_unique<ring::SlotProtocol>(*ring_);
  releaser_ = std::make_shared<trainer::SlotReleaser>(
      [ring = ring_](uint64_t batch_id) { ring::SlotProtocol(*ring).release(batch_id); });
  // Pinning waits for the first iteration (start_cuda_once).
}

void Loader::Impl::spawn(std::vector<std::string> command,
                         const std::string& config_text) {
  // The pool keeps a copy of its own; this one is closed however spawn()
  // ends, so a constructor that throws below leaks no memfd.
  const data::Fd config(ring::SharedRegion::create_text_fd("ringloader-config", config_text));
  const bool autotuned = options_.num_workers == LoaderOptions::kAutoWorkers;
  pool_ = std::make_unique<trainer::WorkerPool>(*ring_, config.fd,
                                                autotuned ? 1 : options_.num_workers,
                                                std::move(command));
  if (autotuned) {
    trainer::AutotuneOptions tune;
    tune.start_workers = 1;
    tune.max_workers = trainer::worker_capacity(options_);
    trainer::autotune_overrides_from_env(tune);
    autotune_ = std::make_unique<trainer::WorkerAutotune>(
        tune, [this] { pool_->add_worker(); },
        [this] { pool_->retire_worker(pool_->size() - 1); },
        [this] { return pool_->live_workers(); });
  }
  trainer::RecoveryOptions recovery;
  recovery.hang_timeout_s = options_.hang_timeout_s;
  recovery.start_timeout_s = worker_start_timeout_s(options_.hang_timeout_s);
  recovery.max_batch_retries = options_.max_batch_retries;
  recovery_ = std::make_unique<trainer::WorkerRecovery>(
      *ring_, *protocol_, *pool_, recovery,
      [this](int64_t index) { return describe_sample(index); });
}

std::string Loader::Impl::describe_sample(int64_t index) const {
  if (external_) return "sample " + std::to_string(index);
  if (config_.dataset.tensor_rows()) return "sample " + std::to_string(index) + " (tensor rows)";
  const Dataset& dataset = config_.dataset;
  if (shard_named_ && is_shard_sample(index)) {
    const ShardSample sample = shard_sample_of(index);
    const auto& shards = dataset.tar_index()->shards;
    return "sample " + std::to_string(sample.ordinal) + " of shard " +
           (static_cast<size_t>(sample.shard) < shards.size() ? shards[sample.shard] : "?");
  }
  if (dataset.sample_table() && index >= 0 && index < dataset.size()) {
    return ringloader::describe_sample(index, dataset.sample_path(index));
  }
  return ringloader::describe_sample(index, dataset.idx_images_path());
}

Loader::Impl::~Impl() {
  staged_.clear();
  device_.reset();  // waits for copies that still read host slots
  recovery_.reset();
  pool_.reset();    // then workers: nobody writes the ring after this
  pin_.reset();
}

ring::RingGeometry Loader::Impl::geometry() const {
  ring::RingGeometry geometry;
  geometry.slot_count = static_cast<uint32_t>(options_.ring_slots);
  geometry.worker_capacity = static_cast<uint32_t>(trainer::worker_capacity(options_));
  geometry.batch_size = static_cast<uint32_t>(options_.batch_size);
  geometry.sample_bytes = shape_.bytes();
  // A window of the epoch's order, not all of it (publish_more): an
  // ImageNet epoch would otherwise hold 2 x 10 MB of shared memory. Shards
  // still being indexed have no size yet: a window.
  // At least one whole batch: an epoch smaller than one batch (drop_last
  // off) had a window of 0 batches, so nothing was ever published and the
  // first next() waited forever.
  const int64_t entries = counter_ ? order_window() : std::min(order_limit(), order_window());
  geometry.order_capacity = static_cast<uint64_t>(std::max(entries, options_.batch_size));
  return geometry;
}

int64_t Loader::Impl::size() {
  adopt_index();
  return epoch_.size();
}

void Loader::Impl::check_order(const std::vector<int64_t>& indices) const {
  const int64_t dataset_size = dataset_size_;
  if (static_cast<int64_t>(indices.size()) > order_limit()) {
    throw OptionError("ringloader: the epoch order lists " +
                      std::to_string(indices.size()) + " samples; at most " +
                      std::to_string(order_limit()) +
                      " fit (raise LoaderOptions::max_samples_per_epoch)");
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= dataset_size) {
      throw OptionError("ringloader: epoch order entry " + std::to_string(i) +
                        " is sample " + std::to_string(indices[i]) +
                        ", outside the dataset of " +
                        std::to_string(dataset_size));
    }
  }
}

void Loader::Impl::set_order(std::vector<int64_t> indices) {
  adopt_index();
  check_order(indices);
  epoch_.set_order(std::move(indices));
}

void Loader::Impl::set_epoch(int64_t epoch) { epoch_.set_epoch(epoch); }

std::optional<Batch> Loader::Impl::next() {
  if (!epoch_.open()) {
    throw Error("ringloader: next() before begin(): start an epoch first");
  }
  if (put_back_) {
    std::optional<Batch> batch = std::move(put_back_);
    put_back_.reset();
    ++handed_out_;
    return batch;
  }
  releaser_->poll();  // slots whose fences passed since the last batch
  std::optional<Batch> batch = device_ ? next_device() : next_host(true);
  if (!batch) return batch;
  ++handed_out_;
  // Taken from the ring, not yet with the caller: a signal landing here must
  // not cost the batch (module.cc's next_of_loader).
  RINGLOADER_FAULT_POINT("next.handed_out");
  // Only batches the caller gets can be spilled: the device stage's host
  // batches are read by copies in flight and end on their own.
  if (!device_) {
    held_.track(epoch_.batch_id(batch->index), batch->data);
  }
  return batch;
}

std::optional<Batch> Loader::Impl::next_checked(const Loader::WaitCheck& check) {
  // Nothing is taken before wait_for() returns, so a throwing check leaves
  // the cursor on the awaited batch.
  struct Reset {
    const Loader::WaitCheck*& hook;
    ~Reset() { hook = nullptr; }
  } reset{wait_check_};
  wait_check_ = check ? &check : nullptr;
  return next();
}

// Hands out the oldest staged device batch, then starts copies of host
// batches that are already ready, up to the free device slots, so H2D
// copies overlap the trainer's compute without a thread of ours.
std::optional<Batch> Loader::Impl::next_device() {
  if (staged_.empty()) {
    std::optional<Batch> host = next_host(true);
    if (!host) return std::nullopt;
    staged_.push_back(device_->to_device(std::move(*host)));
  }
  Batch out = std::move(staged_.front());
  staged_.pop_front();
  while (static_cast<int>(staged_.size()) + 1 < device_->slot_count() &&
         device_->can_accept()) {
    std::optional<Batch> host = next_host(false);
    if (!host) break;
    staged_.push_back(device_->to_device(std::move(*host)));
  }
  return out;
}

// What a worker may name in a slot: dataset indices, or only ShardSamples
// for a loader whose workers got the shard-named view.
ring::SampleRange Loader::Impl::slot_sample_range() const {
  if (!shard_named_) return ring::SampleRange(dataset_size_);
  return ring::SampleRange(0, config_.dataset.tar_index()->shards.size());
}

std::optional<Batch> Loader::Impl::next_host(bool wait) {
  ring_->require_owner("take a batch");
  publish_more();  // first: a growing epoch learns here where it ends
  if (epoch_.done()) {
    if (wait) epoch_.close();
    return std::nullopt;
  }
  const uint64_t batch_id = epoch_.batch_id(epoch_.cursor());
  if (!wait) {
    const uint32_t slot_count = ring_->geometry().slot_count;
    uint32_t state = ring_->slot_for_batch(batch_id)
                         .state.load(std::memory_order_acquire);
    if (state != ring::state_word(batch_id, slot_count, ring::kReady)) {
      return std::nullopt;
    }
  }
  if (in_process_) fill_in_process(batch_id);
  uint64_t start = ring::monotonic_ns();
  uint32_t state = wait_for(batch_id);
  trainer_wait_ns_ += ring::monotonic_ns() - start;
  if (ring::phase_of(state) == ring::kFailed) raise_failure(batch_id);
  // The worker wrote the count and indices: copied and checked once, then
  // only the copies are used (slot_validation.h).
  ring::ReadySlot ready =
      ring::read_ready_slot(*ring_, batch_id, epoch_.expected_samples(), slot_sample_range());
  if (!ready.violation.empty()) reject_batch(batch_id, ready.violation);
  protocol_->lease(batch_id);
  Batch batch = external_ ? trainer::lease_raw_batch(ring_, releaser_, batch_id)
                          : trainer::lease_batch(ring_, releaser_, batch_id, shape_,
                                                 ready.sample_count);
  if (const auto& rows = config_.dataset.tensor_rows(); rows && !external_) {
    batch.data = trainer::rows_view(batch.data, rows->element_type(), rows->row_shape());
  }
  batch.epoch = epoch_.epoch();
  batch.index = epoch_.cursor();
  // From the slot, not the order: with on_error = skip a substitute may
  // stand in for a bad sample.
  batch.sample_indices = std::move(ready.sample_indices);
  if (shard_named_) name_by_index(batch.sample_indices);
  epoch_.advance();
  ++batches_;
  samples_ += static_cast<int64_t>(batch.sample_indices.size());
  after_batch(batch);
  return batch;
}

uint32_t Loader::Impl::wait_for(uint64_t batch_id) {
  const uint32_t slot_count = ring_->geometry().slot_count;
  ring::SlotControl& slot = ring_->slot_for_batch(batch_id);
  const uint32_t ready = ring::state_word(batch_id, slot_count, ring::kReady);
  const uint32_t failed = ring::state_word(batch_id, slot_count, ring::kFailed);
  const auto poll_ns = static_cast<int64_t>(options_.poll_interval_s * 1e9);
  const uint64_t start = ring::monotonic_ns();
  const auto check_ns = static_cast<int64_t>(Loader::kWaitCheckInterval_s * 1e9);
  uint64_t next_check = start + static_cast<uint64_t>(check_ns);
  // A trainer that never waits (the other workers keep up) must still see
  // a dead worker, or the loader runs short-handed without saying so: look
  // every kWaitCheckInterval_s of next() calls too.
  if (recovery_ && start >= last_recovery_check_ns_ + static_cast<uint64_t>(check_ns)) {
    last_recovery_check_ns_ = start;
    recovery_->check();
  }
  for (;;) {
    uint32_t state = slot.state.load(std::memory_order_acquire);
    if (state == ready || state == failed) return state;
    // A state no honest party writes would be waited on forever.
    std::string forged = ring::check_awaited_state(slot_count, batch_id, state);
    if (!forged.empty()) {
      throw WorkerError("ringloader: " + where() + ": " + forged);
    }
    // A filler killed between publishing a batch of an abandoned epoch and
    // moving its slot on (SlotProtocol::publish) left the slot parked on a
    // dead id that no one else will move: the waiting trainer does.
    protocol_->advance_if_cancelled(ring::slot_of(batch_id, slot_count));
    free_leased_slot(batch_id, state);
    if (recovery_) {
      recovery_->check();
      if (recovery_->fail_if_given_up(batch_id)) continue;
    }
    check_timeout(start);
    if (wait_check_ && ring::monotonic_ns() >= next_check) {
      (*wait_check_)();  // may throw: nothing of this batch is taken yet
      next_check = ring::monotonic_ns() + check_ns;
    }
    // Slots held back by fences free up as the GPU advances: look again
    // soon, so workers are not kept from them for a whole poll interval.
    releaser_->poll();
    int64_t wait_ns = releaser_->deferred() > 0 ? std::min<int64_t>(poll_ns, 1'000'000)
                                                : poll_ns;
    if (wait_check_) wait_ns = std::min(wait_ns, check_ns);
    ring::futex_wait(slot.state, state, wait_ns);
  }
}

void Loader::Impl::check_timeout(uint64_t wait_start_ns) const {
  if (options_.timeout_s <= 0) return;
  double waited = (ring::monotonic_ns() - wait_start_ns) * 1e-9;
  if (waited < options_.timeout_s) return;
  throw WorkerError("ringloader: DataLoader timed out after " +
                    std::to_string(options_.timeout_s) +
                    " s waiting for " + where());
}

void Loader::Impl::fill_in_process(uint64_t batch_id) {
  ring::SlotControl& slot = ring_->slot_for_batch(batch_id);
  free_leased_slot(batch_id, slot.state.load(std::memory_order_acquire));
  if (wait_for_held_slots_) wait_while_leased(slot);
  ring::Claim claim;
  if (!protocol_->try_claim(claim) || claim.batch_id != batch_id) {
    throw Error("ringloader: internal error: in-process claim out of order");
  }
  uint64_t start = ring::monotonic_ns();
  if (!protocol_->acquire_for_fill(batch_id, [] { return true; })) {
    throw Error("ringloader: internal error: in-process batch cancelled");
  }
  ring_->worker(0).slot_wait_ns.fetch_add(ring::monotonic_ns() - start,
                                          std::memory_order_relaxed);
  in_process_->fill(claim);
}

std::vector<int> Loader::Impl::worker_pids() const {
  return pool_ ? pool_->pids() : std::vector<int>{};
}

LoaderStats Loader::Impl::stats() const {
  LoaderStats stats;
  stats.batches = batches_;
  stats.samples = samples_;
  stats.wall_s = (ring::monotonic_ns() - created_ns_) * 1e-9;
  stats.trainer_wait_s = trainer_wait_ns_ * 1e-9;
  for (uint32_t i = 0; i < ring_->geometry().worker_capacity; ++i) {
    const ring::WorkerControl& worker = ring_->worker(i);
    stats.read_s += worker.read_ns.load(std::memory_order_relaxed) * 1e-9;
    stats.decode_s += worker.decode_ns.load(std::memory_order_relaxed) * 1e-9;
    stats.transform_s += worker.transform_ns.load(std::memory_order_relaxed) * 1e-9;
    stats.slot_wait_s += worker.slot_wait_ns.load(std::memory_order_relaxed) * 1e-9;
  }
  stats.workers = pool_ ? pool_->live_workers() : 0;
  stats.ring_slots = options_.ring_slots;
  stats.ring_bytes = ring_->bytes();
  struct stat ring_file {};
  if (fstat(ring_->fd(), &ring_file) == 0) {
    stats.ring_resident_bytes = static_cast<size_t>(ring_file.st_blocks) * 512;
  }
  stats.ring_pinned = pin_.pinned();
  stats.device_batches = device_ ? device_->batches() : 0;
  // Workers write these counters: summed unsigned, a garbage one makes a
  // wrong figure, never a signed overflow.
  uint64_t skipped = 0;
  for (uint32_t i = 0; i < ring_->geometry().worker_capacity; ++i) {
    skipped += ring_->worker(i).skipped.load(std::memory_order_relaxed);
  }
  stats.skipped_samples = static_cast<int64_t>(skipped & INT64_MAX);
  stats.worker_restarts = recovery_ ? recovery_->restarts() : 0;
  stats.redone_batches = recovery_ ? recovery_->redone_batches() : 0;
  stats.spilled_batches = held_.spilled();
  add_tuning_stats(stats);
  return stats;
}

}  // namespace ringloader
