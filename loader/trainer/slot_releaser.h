// SPDX-License-Identifier: BSD-3-Clause
// Hands ring slots back to the workers when their batches die, deferred
// behind a release fence once the ring is pinned (release_fence.h).
//
//   any thread:  last tensor dies -> release(b): fence recorded, b queued
//   trainer:     poll()            -> hands back queued slots whose fence is
//                                     done, oldest first
//                flush_through(b)  -> the trainer needs b's slot: waits for
//                                     the fences up to b's and hands them back
//
// Without a fence source, release() hands the slot back at once.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "loader/trainer/release_fence.h"

namespace ringloader::trainer {

class SlotReleaser {
 public:
  // `hand_back` frees a batch's slot (SlotProtocol::release); any thread.
  using HandBack = std::function<void(uint64_t batch_id)>;
  explicit SlotReleaser(HandBack hand_back);
  ~SlotReleaser();
  SlotReleaser(const SlotReleaser&) = delete;
  SlotReleaser& operator=(const SlotReleaser&) = delete;

  // Fences every later release (null: none). Thread-safe.
  void set_fences(std::unique_ptr<FenceSource> source);
  // Any thread: the last tensor of `batch_id` died.
  void release(uint64_t batch_id);
  // Trainer: hands back queued slots whose fence is done, in queue order,
  // stopping at the first one not done (one stream's fences complete in
  // order, so the rest would rarely be done either).
  void poll();
  // Trainer: if `batch_id` is queued, waits for its fence and those queued
  // before it, hands them all back and returns true; false otherwise.
  bool flush_through(uint64_t batch_id);
  // Any thread, at teardown: waits for every queued fence and hands its
  // slot back (a node lane must not be reclaimed under a live reader).
  void flush_all();
  // Slots queued behind a fence.
  size_t deferred() const;

 private:
  struct Pending {
    uint64_t batch_id;
    std::unique_ptr<ReleaseFence> fence;
  };
  HandBack hand_back_;
  mutable std::mutex mutex_;  // guards source_ and pending_
  std::shared_ptr<FenceSource> source_;
  std::deque<Pending> pending_;
};

}  // namespace ringloader::trainer
