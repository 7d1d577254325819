// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/slot_releaser.h"

#include <utility>
#include <vector>

namespace ringloader::trainer {
namespace {
thread_local bool unfenced_here = false;
}  // namespace

UnfencedReleaseScope::UnfencedReleaseScope() : previous_(unfenced_here) {
  unfenced_here = true;
}
UnfencedReleaseScope::~UnfencedReleaseScope() { unfenced_here = previous_; }
bool UnfencedReleaseScope::active() { return unfenced_here; }

SlotReleaser::SlotReleaser(HandBack hand_back) : hand_back_(std::move(hand_back)) {}

SlotReleaser::~SlotReleaser() {
  // Nobody polls any more (the Loader and every lease are gone): the
  // workers are gone too, so waiting would only delay teardown.
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
}

void SlotReleaser::set_fences(std::unique_ptr<FenceSource> source) {
  std::lock_guard<std::mutex> lock(mutex_);
  source_ = std::move(source);
}

void SlotReleaser::release(uint64_t batch_id) {
  std::shared_ptr<FenceSource> source;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    source = source_;
  }
  if (!source || UnfencedReleaseScope::active()) {
    hand_back_(batch_id);
    return;
  }
  // Recorded outside the lock: it calls into the CUDA runtime.
  std::unique_ptr<ReleaseFence> fence = source->record();
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back({batch_id, std::move(fence)});
}

void SlotReleaser::poll() {
  for (;;) {
    Pending next;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (pending_.empty() || !pending_.front().fence->done()) return;
      next = std::move(pending_.front());
      pending_.pop_front();
    }
    hand_back_(next.batch_id);
  }
}

bool SlotReleaser::flush_through(uint64_t batch_id) {
  std::vector<Pending> ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t end = 0;
    while (end < pending_.size() && pending_[end].batch_id != batch_id) ++end;
    if (end == pending_.size()) return false;
    for (size_t i = 0; i <= end; ++i) ready.push_back(std::move(pending_[i]));
    pending_.erase(pending_.begin(), pending_.begin() + end + 1);
  }
  // Waited outside the lock: releasing threads must not block on the GPU.
  for (Pending& pending : ready) {
    pending.fence->wait();
    hand_back_(pending.batch_id);
  }
  return true;
}

void SlotReleaser::flush_all() {
  std::deque<Pending> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    all.swap(pending_);
  }
  for (Pending& pending : all) {
    pending.fence->wait();
    hand_back_(pending.batch_id);
  }
}

size_t SlotReleaser::deferred() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

}  // namespace ringloader::trainer
