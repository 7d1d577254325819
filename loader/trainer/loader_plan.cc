// SPDX-License-Identifier: BSD-3-Clause
// Loader::Impl's epoch plans: what start_epoch publishes to the ring, and
// how a long (or still growing) epoch is published a window of the order
// table at a time (docs/architecture.md, "Claims and plans").
#include <algorithm>

#include "loader/trainer/loader_impl.h"

namespace ringloader {

int64_t Loader::Impl::order_limit() const {
  return std::max<int64_t>(
      {int64_t{1}, epoch_.sampler().samples_per_epoch(), options_.max_samples_per_epoch});
}

// Entries per order table: 4 x ring_slots batches at least, so a window
// refilled at its half keeps twice the ring's batches claimable.
int64_t Loader::Impl::order_window() const {
  constexpr int64_t kMinWindowSamples = 65536;
  return std::max(kMinWindowSamples, 4 * options_.ring_slots * options_.batch_size);
}

void Loader::Impl::start_epoch() {
  ring_->require_owner("start an epoch");  // a fork child would steer the parent's workers
  start_cuda_once();
  staged_.clear();  // device batches of an abandoned epoch
  put_back_.reset();
  if (counter_ && counter_->complete()) adopt_index();
  size_t first_sample = 0;
  if (counter_) {
    start_streamed_epoch();  // shards still being indexed (loader_streamed.cc)
  } else {
    streamed_.reset();
    // A restored position: the plan holds only the batches not yet
    // consumed, so the skipped ones are never decoded (epoch.cc).
    first_sample = epoch_.start();
  }
  const std::vector<int64_t>& order = epoch_.order();
  plan_.table = plans_published_++ % 2;
  plan_.first_sample = first_sample;
  plan_.samples = order.size() - first_sample;
  plan_.batches = static_cast<uint64_t>(epoch_.batch_count() - epoch_.offset());
  plan_.published_batches = 0;
  plan_.published_samples = 0;
  const uint64_t batches = plan_window_end(0);
  write_plan_entries(batches);
  // publish_plan's release CAS makes the table visible to claimers, and
  // cancels whatever the previous epoch had claimed but we never took.
  // A Loader that waits for held slots keeps ids contiguous: its owner (the
  // node) sizes the ring so that, over one unbroken run of ids, no slot it
  // needs is still held (node_loader.cc).
  const uint64_t first_batch = protocol_->publish_plan(
      static_cast<uint64_t>(epoch_.epoch()), batches, plan_.published_samples, plan_.table,
      wait_for_held_slots_ ? ring::SlotProtocol::PlanStart::kContiguous
                           : ring::SlotProtocol::PlanStart::kSkipLeased);
  if (recovery_) recovery_->forget_before(first_batch);
  if (prefetcher_) prefetcher_->start(order, first_sample);
  epoch_.opened(first_batch);
}

// The plan's batches whose entries fit the order table's window when the
// trainer's next batch is the plan's `plan_cursor`-th: entries of batches
// before the cursor are done with (READY, taken), so their places are
// free; all of the plan when the window holds it whole.
uint64_t Loader::Impl::plan_window_end(uint64_t plan_cursor) const {
  return std::min(plan_.batches, plan_cursor + window_batches());
}

uint64_t Loader::Impl::window_batches() const {
  return ring_->geometry().order_capacity / ring_->geometry().batch_size;
}

void Loader::Impl::write_plan_entries(uint64_t batches) {
  const uint64_t batch_size = ring_->geometry().batch_size;
  // Whole batches only: drop_last's leftover samples are never read, and
  // writing them could wrap onto entries a filler still needs.
  const uint64_t samples = std::min(plan_.samples, batches * batch_size);
  const std::vector<int64_t>& order = epoch_.order();
  for (uint64_t i = plan_.published_samples; i < samples; ++i) {
    ring_->set_order_entry(plan_.table, i, order_entry(order[plan_.first_sample + i]));
  }
  plan_.published_batches = batches;
  plan_.published_samples = samples;
}

// An epoch longer than the order table's window is published a window at a
// time: once the batches left ahead of the cursor fall to half a window,
// the plan is extended by what the consumed batches freed. Workers are then
// at least half a window (>= 2 x ring_slots batches) from running dry.
void Loader::Impl::publish_more() {
  const auto plan_cursor = static_cast<uint64_t>(epoch_.cursor() - epoch_.offset());
  const uint64_t window = window_batches();
  if (epoch_.growing()) grow_epoch(plan_cursor, window);
  if (plan_.published_batches == plan_.batches) return;
  const uint64_t end = plan_window_end(plan_cursor);
  if (end < plan_.batches && end - plan_.published_batches < window / 2) return;
  write_plan_entries(end);
  protocol_->extend_plan(plan_.published_batches, plan_.published_samples);
}

}  // namespace ringloader
