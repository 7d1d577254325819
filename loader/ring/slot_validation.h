// SPDX-License-Identifier: BSD-3-Clause
// The trainer's reads of slot words that a worker writes. Workers map the
// whole ring read-write, so a buggy or hostile worker can put any value in
// any word at any time. Each function here copies the words it needs out of
// shared memory exactly once, checks the copies against what the trainer
// knows on its own (the batch it waits for, the batch's sample count, the
// dataset size, the worker count), and hands back only the copies: a word
// changed after the check changes nothing the trainer acts on.
//
// A failed check is a violation: its text names the slot, the batch id,
// the field, the value and what was expected. Torch-free, so the fuzz
// harness (tests/fuzz/fuzz_slot_protocol.cc) links it without the trainer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loader/ring/ring.h"

namespace ringloader::ring {

// A READY slot's record, copied. `violation` is empty when every word
// passed; otherwise the other fields must not be used.
struct ReadySlot {
  uint32_t sample_count = 0;
  std::vector<int64_t> sample_indices;  // sample_count entries
  std::string violation;
};

// The sample names a slot may hold: dataset indices in [0, dataset_size),
// or, with shards > 0, ShardSamples (dataset.h) of a shard below `shards`
// (workers of tar shards still being indexed name samples so).
struct SampleRange {
  SampleRange(int64_t dataset_size, uint64_t shards = 0)  // NOLINT: a size is a range
      : dataset_size(dataset_size), shards(shards) {}
  int64_t dataset_size;
  uint64_t shards;
  bool holds(int64_t index) const;
  std::string text() const;
};

// The READY slot of `batch_id`, which must hold exactly `expected_count`
// samples (the trainer computes it from its own epoch order), each named
// inside `range`.
ReadySlot read_ready_slot(const Ring& ring, uint64_t batch_id, uint32_t expected_count,
                          const SampleRange& range);

// A FAILED slot's error record, copied.
struct FailedSlot {
  ErrorKind kind = ErrorKind::kOther;  // an unknown kind reads as kOther
  int32_t filler = -1;  // a worker index below worker_capacity, or -1
  // At most kErrorTextBytes - 1 bytes, valid UTF-8 (Python turns it into
  // an exception's str), whether or not the worker wrote a terminator.
  std::string text;
  std::string note;  // what was wrong with the record, or empty
};
FailedSlot read_failed_slot(const Ring& ring, uint64_t batch_id);

// `text` as it fits a slot's error record (kErrorTextBytes - 1 bytes): a
// longer one keeps its head (which batch and sample) and its tail (the
// reason, which comes last), eliding the middle (usually a long path or
// pipe: command named twice). Cuts fall between UTF-8 characters.
std::string fit_error_text(const std::string& text);

// The slot's filler word when it names a worker of this ring, else -1.
int32_t read_filler(const Ring& ring, uint32_t slot);

// Empty when an honest party may have written `state` into the slot of
// `batch_id` while the trainer waits for that batch; else the violation.
// Honest states refer to batch_id or an older id of the slot, in phases
// FREE, FILLING, READY or FAILED (or LEASED for an older id, still held).
std::string check_awaited_state(uint32_t slot_count, uint64_t batch_id, uint32_t state);

// `bytes` (up to `capacity`, stopping at the first NUL) as printable UTF-8:
// invalid sequences and control characters become '?'.
std::string sanitize_text(const char* bytes, size_t capacity);

}  // namespace ringloader::ring
