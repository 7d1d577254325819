// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer harness for the trainer's side of the slot protocol against a
// worker that writes anything. One ring lives in this process (no worker
// processes); the input is a script of steps. Some steps are an honest
// worker (claim, fill, publish READY or FAILED), some a hostile one (any
// value into any word a worker can write: slot state, filler, count, error
// record, sample indices and targets, claim word, cancel mark, plans, redo
// queue, worker table), and the rest are the trainer doing what
// Loader::Impl does: wait one round for its batch, check the state word,
// read and check a READY or FAILED record (slot_validation.h), lease,
// release, start epochs, re-queue batches. The trainer must only ever get a
// checked record or a violation; anything it then touches is checked here
// to lie inside the slot it belongs to (the ring is an mmap that ASan does
// not watch), and every copy it makes lands on the heap, which ASan does.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "loader/ring/ring.h"
#include "loader/ring/slot_protocol.h"
#include "loader/ring/slot_validation.h"

namespace {

using namespace ringloader::ring;

constexpr uint32_t kSlots = 3;
constexpr uint32_t kWorkers = 2;
constexpr uint32_t kBatch = 4;
constexpr uint64_t kSampleBytes = 24;
constexpr int64_t kDatasetSize = 11;
constexpr uint64_t kOrderCapacity = 16;

void check(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_slot_protocol: %s\n", what);
  std::abort();
}

bool valid_utf8_text(const std::string& text) {
  return sanitize_text(text.c_str(), text.size() + 1) == text;
}

class Script {
 public:
  explicit Script(FuzzedDataProvider& in) : in_(in) {
    RingGeometry geometry;
    geometry.slot_count = kSlots;
    geometry.worker_capacity = kWorkers;
    geometry.batch_size = kBatch;
    geometry.sample_bytes = kSampleBytes;
    geometry.order_capacity = kOrderCapacity;
    ring_ = Ring::create(geometry);
    protocol_ = std::make_unique<SlotProtocol>(*ring_);
  }

  void run() {
    start_epoch();
    for (int step = 0; step < 200 && in_.remaining_bytes() > 0; ++step) {
      switch (in_.ConsumeIntegralInRange<int>(0, 9)) {
        case 0: honest_fill(false); break;
        case 1: honest_fill(true); break;
        case 2: scribble_slot(); break;
        case 3: scribble_slot_data(); break;
        case 4: scribble_shared(); break;
        case 5: case 6: trainer_next(); break;
        case 7: release_held(); break;
        case 8: start_epoch(); break;
        default: recovery_probe(); break;
      }
    }
    while (!held_.empty()) release_held();
  }

 private:
  // Loader::Impl::start_epoch: an order of 0..16 samples, then a plan.
  void start_epoch() {
    order_.assign(in_.ConsumeIntegralInRange<size_t>(0, kOrderCapacity), 0);
    for (int64_t& sample : order_) sample = in_.ConsumeIntegralInRange<int64_t>(0, kDatasetSize - 1);
    const uint64_t table = epochs_ % 2;
    for (size_t i = 0; i < order_.size(); ++i) {
      ring_->order_table(table)[i].store(order_[i], std::memory_order_relaxed);
    }
    batch_count_ = (order_.size() + kBatch - 1) / kBatch;
    first_batch_ = protocol_->publish_plan(epochs_, batch_count_, order_.size(), table);
    cursor_ = 0;
    ++epochs_;
  }

  uint32_t expected_samples() const {
    const int64_t left = static_cast<int64_t>(order_.size()) - static_cast<int64_t>(cursor_ * kBatch);
    return static_cast<uint32_t>(std::clamp<int64_t>(left, 0, kBatch));
  }

  // A worker that follows the protocol: claim, take the slot if it is free
  // for the batch, write it, publish. It reads its samples from the
  // trainer's own order, not the (peer-writable) order table.
  void honest_fill(bool fail) {
    Claim claim;
    std::atomic<uint64_t>& intent = ring_->worker(0).current_batch;
    if (!protocol_->try_take_redo(claim, intent) && !protocol_->try_claim(claim, &intent)) return;
    if (!protocol_->acquire_for_fill(claim.batch_id, [] { return false; })) return;
    const uint32_t slot_index = slot_of(claim.batch_id, kSlots);
    SlotControl& slot = ring_->slot(slot_index);
    slot.filler.store(in_.ConsumeIntegralInRange<int32_t>(0, kWorkers - 1), std::memory_order_relaxed);
    slot.batch_id.store(claim.batch_id, std::memory_order_relaxed);
    const uint64_t begin = std::min<uint64_t>(claim.local_index * kBatch, order_.size());
    const uint64_t end = std::min<uint64_t>(begin + kBatch, order_.size());
    slot.sample_count = static_cast<uint32_t>(end - begin);
    for (uint64_t i = begin; i < end; ++i) {
      ring_->slot_sample_indices(slot_index)[i - begin] = order_[i];
      ring_->slot_targets(slot_index)[i - begin] = static_cast<int64_t>(i);
    }
    if (fail) {
      slot.error_kind = static_cast<uint32_t>(ErrorKind::kDecode);
      std::snprintf(slot.error_text, kErrorTextBytes, "sample %llu: bad",
                    static_cast<unsigned long long>(begin));
    }
    protocol_->publish(claim.batch_id, fail ? kFailed : kReady);
    intent.store(kNoBatch, std::memory_order_release);
  }

  // Any value into any word of a slot's control block.
  void scribble_slot() {
    SlotControl& slot = ring_->slot(in_.ConsumeIntegralInRange<uint32_t>(0, kSlots - 1));
    switch (in_.ConsumeIntegralInRange<int>(0, 8)) {
      case 0: slot.state.store(in_.ConsumeIntegral<uint32_t>(), std::memory_order_release); break;
      case 1: {  // a plausible state: some phase of a nearby generation
        const uint32_t generation = static_cast<uint32_t>((first_batch_ + cursor_) / kSlots) +
                                    in_.ConsumeIntegralInRange<uint32_t>(0, 3) - 1;
        slot.state.store((generation & kGenerationMask) << kPhaseBits |
                             in_.ConsumeIntegralInRange<uint32_t>(0, 7),
                         std::memory_order_release);
        break;
      }
      case 2: slot.filler.store(in_.ConsumeIntegral<int32_t>(), std::memory_order_relaxed); break;
      case 3: slot.batch_id.store(in_.ConsumeIntegral<uint64_t>(), std::memory_order_relaxed); break;
      case 4: slot.sample_count = in_.ConsumeIntegral<uint32_t>(); break;
      case 5: slot.error_kind = in_.ConsumeIntegral<uint32_t>(); break;
      case 6: slot.error_sample = in_.ConsumeIntegral<int64_t>(); slot.epoch = in_.ConsumeIntegral<uint64_t>(); break;
      case 7: {  // error text and the padding after it, unterminated or not
        const size_t at = in_.ConsumeIntegralInRange<size_t>(0, kErrorTextBytes + sizeof slot.padding2 - 1);
        std::string bytes = in_.ConsumeBytesAsString(kErrorTextBytes + sizeof slot.padding2 - at);
        char* text = reinterpret_cast<char*>(&slot) + offsetof(SlotControl, error_text);
        std::memcpy(text + at, bytes.data(), bytes.size());
        break;
      }
      default: slot.sample_count = kBatch + in_.ConsumeIntegralInRange<uint32_t>(0, 2) - 1; break;
    }
  }

  // Sample indices and labels of a slot.
  void scribble_slot_data() {
    const uint32_t slot = in_.ConsumeIntegralInRange<uint32_t>(0, kSlots - 1);
    const uint32_t position = in_.ConsumeIntegralInRange<uint32_t>(0, kBatch - 1);
    const int64_t value = in_.ConsumeBool() ? in_.ConsumeIntegral<int64_t>()
                                            : in_.ConsumeIntegralInRange<int64_t>(-1, kDatasetSize);
    if (in_.ConsumeBool()) {
      ring_->slot_sample_indices(slot)[position] = value;
    } else {
      ring_->slot_targets(slot)[position] = value;
    }
  }

  // Words outside the slots that a worker can write too.
  void scribble_shared() {
    ClaimControl& claims = ring_->claims();
    const uint64_t value = in_.ConsumeIntegral<uint64_t>();
    switch (in_.ConsumeIntegralInRange<int>(0, 7)) {
      case 0: claims.claim.store(value, std::memory_order_release); break;
      case 1: claims.claim.fetch_add(in_.ConsumeIntegralInRange<uint64_t>(0, 3), std::memory_order_acq_rel); break;
      case 2: claims.cancel_before.store(value, std::memory_order_seq_cst); break;
      case 3: {
        Plan& plan = ring_->plan(in_.ConsumeIntegral<uint8_t>());
        std::atomic<uint64_t>* fields[] = {&plan.tag, &plan.first_batch, &plan.batch_count,
                                           &plan.sample_count, &plan.epoch, &plan.order_table};
        fields[in_.ConsumeIntegralInRange<int>(0, 5)]->store(value, std::memory_order_relaxed);
        break;
      }
      case 4: ring_->redo().batch[value % kRedoEntries].store(in_.ConsumeIntegral<uint64_t>(), std::memory_order_release); break;
      case 5: {
        WorkerControl& worker = ring_->worker(in_.ConsumeIntegralInRange<uint32_t>(0, kWorkers - 1));
        worker.current_batch.store(value, std::memory_order_release);
        worker.pid.store(in_.ConsumeIntegral<int32_t>(), std::memory_order_relaxed);
        worker.current_sample.store(in_.ConsumeIntegral<int64_t>(), std::memory_order_relaxed);
        break;
      }
      case 6: claims.shutdown.store(static_cast<uint32_t>(value), std::memory_order_release); break;
      default: ring_->order_table(value)[in_.ConsumeIntegralInRange<uint64_t>(0, kOrderCapacity - 1)]
                   .store(in_.ConsumeIntegral<int64_t>(), std::memory_order_relaxed); break;
    }
  }

  // One round of Loader::Impl::wait_for, then what next_host does with it.
  void trainer_next() {
    if (cursor_ >= batch_count_) return;
    const uint64_t batch_id = first_batch_ + cursor_;
    const uint32_t slot_index = slot_of(batch_id, kSlots);
    const uint32_t state = ring_->slot(slot_index).state.load(std::memory_order_acquire);
    if (state == state_word(batch_id, kSlots, kFailed)) return take_failed(batch_id);
    if (state == state_word(batch_id, kSlots, kReady)) return take_ready(batch_id);
    if (!check_awaited_state(kSlots, batch_id, state).empty()) return;  // raised
    protocol_->advance_if_cancelled(slot_index);
    // free_leased_slot: a batch the trainer holds in that slot is released
    // (spilled); an unknown one raises LeaseError.
    if (phase_of(state) == kLeased) {
      const uint64_t holder = protocol_->id_of_state(state, slot_index);
      auto held = std::find(held_.begin(), held_.end(), holder);
      if (held != held_.end()) {
        protocol_->release(holder);
        held_.erase(held);
      }
    }
  }

  void take_ready(uint64_t batch_id) {
    const uint32_t slot_index = slot_of(batch_id, kSlots);
    const uint32_t expected = expected_samples();
    ReadySlot ready = read_ready_slot(*ring_, batch_id, expected, kDatasetSize);
    ++cursor_;
    if (!ready.violation.empty()) {  // reject_batch: dropped, raised
      check(ready.violation.find("slot " + std::to_string(slot_index)) != std::string::npos,
            "a violation that does not name its slot");
      protocol_->release(batch_id);
      return;
    }
    check(ready.sample_count == expected && ready.sample_count <= kBatch, "unchecked count");
    check(ready.sample_indices.size() == ready.sample_count, "indices not copied whole");
    for (int64_t index : ready.sample_indices) {
      check(index >= 0 && index < kDatasetSize, "an unchecked sample index");
    }
    // What lease_batch then reads: count samples and count labels, which
    // must lie inside the slot's own data.
    const uint8_t* data = ring_->slot_data(slot_index);
    const auto* targets = reinterpret_cast<const uint8_t*>(ring_->slot_targets(slot_index));
    check(data + uint64_t{ready.sample_count} * kSampleBytes <= targets, "samples past the slot");
    check(targets + ready.sample_count * sizeof(int64_t) <=
              data + ring_->geometry().slot_data_bytes(), "labels past the slot");
    std::vector<uint8_t> samples(data, data + uint64_t{ready.sample_count} * kSampleBytes);
    std::vector<int64_t> labels(ready.sample_count);
    std::memcpy(labels.data(), targets, labels.size() * sizeof(int64_t));
    protocol_->lease(batch_id);
    held_.push_back(batch_id);
  }

  void take_failed(uint64_t batch_id) {
    FailedSlot failed = read_failed_slot(*ring_, batch_id);
    check(failed.text.size() < kErrorTextBytes, "error text longer than its field");
    check(valid_utf8_text(failed.text), "error text that is not clean UTF-8");
    check(failed.filler >= -1 && failed.filler < static_cast<int32_t>(kWorkers), "unchecked filler");
    check(failed.kind == ErrorKind::kIo || failed.kind == ErrorKind::kDecode ||
              failed.kind == ErrorKind::kOther, "an unknown error kind");
    std::string message = failed.text + failed.note;
    if (failed.filler >= 0) {
      message += std::to_string(ring_->worker(static_cast<uint32_t>(failed.filler)).pid.load());
    }
    protocol_->release(batch_id);
    ++cursor_;
  }

  void release_held() {
    if (held_.empty()) return;
    protocol_->release(held_.front());
    held_.pop_front();
  }

  // What WorkerRecovery reads and does: claimed end, the redo queue.
  void recovery_probe() {
    const uint64_t end = protocol_->claimed_end();
    const uint64_t batch_id = in_.ConsumeBool() ? first_batch_ + cursor_ : end;
    if (!protocol_->redo_queued(batch_id) && !protocol_->cancelled(batch_id)) {
      protocol_->push_redo(batch_id);
    }
    protocol_->next_live_id(in_.ConsumeIntegral<uint64_t>());
  }

  FuzzedDataProvider& in_;
  std::shared_ptr<Ring> ring_;
  std::unique_ptr<SlotProtocol> protocol_;
  std::vector<int64_t> order_;
  std::deque<uint64_t> held_;
  uint64_t epochs_ = 0;
  uint64_t first_batch_ = 0;
  uint64_t batch_count_ = 0;
  uint64_t cursor_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Script(in).run();
  return 0;
}
