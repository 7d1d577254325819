// SPDX-License-Identifier: BSD-3-Clause
// The public Loader: a thin shell over Loader::Impl, plus its iterator.
#include "ringloader/loader.h"

#include <cstdio>

#include "loader/trainer/loader_impl.h"

namespace ringloader {

Loader::Loader(Dataset dataset, Pipeline pipeline, LoaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(dataset), std::move(pipeline),
                                   std::move(options))) {}
Loader::Loader(ExternalWorkers workers, LoaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(workers), std::move(options))) {}
Loader::~Loader() {
  // A fork child's copy: the workers, threads and shard commands it names
  // are the parent's (ring/process_owned.h).
  if (impl_ && !impl_->made_here()) (void)impl_.release();
}

void Loader::set_epoch(int64_t epoch) { impl_->set_epoch(epoch); }
void Loader::set_order(std::vector<int64_t> indices) {
  impl_->set_order(std::move(indices));
}
LoaderState Loader::state_dict() const { return impl_->state_dict(); }
void Loader::load_state_dict(const std::vector<LoaderState>& states) {
  impl_->load_state_dict(LoaderState::merge(states));
}
void Loader::load_state_dict(const LoaderState& state) {
  impl_->load_state_dict(state);
}
int64_t Loader::size() const { return impl_->size(); }
const SampleShape& Loader::sample_shape() const { return impl_->shape(); }
const LoaderOptions& Loader::options() const { return impl_->options(); }
LoaderStats Loader::stats() const { return impl_->stats(); }
std::vector<int> Loader::worker_pids() const { return impl_->worker_pids(); }

Loader::Iterator Loader::begin() {
  impl_->start_epoch();
  return Iterator(this);
}

void Loader::begin_epoch() { impl_->start_epoch(); }

std::optional<Batch> Loader::next() { return impl_->next(); }

std::optional<Batch> Loader::next(const WaitCheck& check) {
  return impl_->next_checked(check);
}

void Loader::put_back(Batch batch) { impl_->put_back(std::move(batch)); }

int64_t Loader::batches_handed_out() const { return impl_->batches_handed_out(); }

Loader::Iterator::Iterator(Loader* loader) : loader_(loader) { ++*this; }

Loader::Iterator& Loader::Iterator::operator++() {
  if (!loader_) return *this;
  // Drop our lease on the previous batch before waiting for the next one.
  current_ = Batch{};
  std::optional<Batch> batch = loader_->next();
  if (batch) {
    current_ = std::move(*batch);
  } else {
    loader_ = nullptr;
  }
  return *this;
}

std::string LoaderStats::to_string() const {
  char text[512];
  double per_sample = samples > 0 ? 1e6 / samples : 0;
  std::snprintf(
      text, sizeof(text),
      "%lld batches, %lld samples in %.1f s (%.0f samples/s)\n"
      "  workers (summed over %d): read %.2f s, decode %.2f s, transform "
      "%.2f s, wait for slot %.2f s (%.1f us/sample in decode+transform)\n"
      "  trainer stall waiting for data: %.2f s (%.1f%% of wall time)\n"
      "  ring: %d slots, %.1f MiB (%.1f MiB resident)",
      static_cast<long long>(batches), static_cast<long long>(samples), wall_s,
      wall_s > 0 ? samples / wall_s : 0.0, workers, read_s, decode_s,
      transform_s, slot_wait_s, (decode_s + transform_s) * per_sample,
      trainer_wait_s, wall_s > 0 ? 100.0 * trainer_wait_s / wall_s : 0.0,
      ring_slots, ring_bytes / 1048576.0, ring_resident_bytes / 1048576.0);
  std::string out = text;
  if (skipped_samples || worker_restarts || redone_batches) {
    out += "\n  faults: " + std::to_string(skipped_samples) +
           " bad samples skipped, " + std::to_string(worker_restarts) +
           " workers replaced, " + std::to_string(redone_batches) +
           " batches re-done";
  }
  if (spilled_batches) {
    out += "\n  held batches spilled out of the ring: " + std::to_string(spilled_batches);
  }
  if (shard_fetches) {
    out += "\n  shard cache: " + std::to_string(shard_fetches) + " shards fetched (" +
           std::to_string(shard_bytes_fetched) + " bytes)";
  }
  for (const std::string& decision : autotune_decisions) out += "\n  autotune: " + decision;
  return out;
}

}  // namespace ringloader
