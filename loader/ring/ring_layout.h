// SPDX-License-Identifier: BSD-3-Clause
// Everything the trainer and its workers share, in one place. The ring is one
// memfd region laid out as:
//
//   RingHeader | ClaimControl | Plan[kPlanCount] | RedoQueue | SlotControl[K] |
//   WorkerControl[W] | order tables [2][capacity] | slot data [K] (page-aligned)
//
// A slot's data holds batch_size samples, then batch_size int64 targets, then
// batch_size int64 dataset indices (the samples actually used: with
// on_error = skip a bad sample's place is taken by a substitute).
//
// Nothing else is ever written to shared memory. Every struct is
// standard-layout, cache-line aligned (no false sharing between a slot the
// trainer polls and one a worker fills), and its layout is asserted, because
// two separately compiled executables (trainer library, worker) read it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace ringloader::ring {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kPageSize = 4096;
inline constexpr uint64_t kMagic = 0x44414f4c474e4952ULL;  // "RINGLOAD"
inline constexpr uint32_t kLayoutVersion = 4;  // 4: order tables are windows (entry i % capacity)
// Plans are double-double buffered: a worker that read plan t may still
// look at it while the trainer publishes t+1, never t+4.
inline constexpr uint32_t kPlanCount = 4;
inline constexpr size_t kErrorTextBytes = 400;

// Written once by the trainer before any worker exists; read-only after.
struct alignas(kCacheLine) RingHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t slot_count;        // K
  uint32_t worker_capacity;   // W: WorkerControl entries
  uint32_t batch_size;
  uint64_t sample_bytes;      // one transformed sample
  uint64_t slot_data_bytes;   // stride of slot data, page multiple
  uint64_t targets_offset;    // int64 labels, from the start of a slot's data
  uint64_t order_capacity;    // entries per order table (a window: i % capacity)
  uint64_t total_bytes;
  int32_t trainer_pid;
  // 1: the trainer holds a lock on the ring through a close-on-exec
  // descriptor of its own (Ring::trainer_gone): workers see it go when the
  // trainer exits or execs. 0: no /proc to reopen the memfd; not watched.
  uint32_t trainer_lock;
  uint64_t indices_offset;    // int64 sample indices, from the slot's start
  char padding[2 * kCacheLine - 80];
};
static_assert(std::is_standard_layout_v<RingHeader>);
static_assert(sizeof(RingHeader) == 128 && alignof(RingHeader) == 64);
static_assert(offsetof(RingHeader, sample_bytes) == 24);
static_assert(offsetof(RingHeader, trainer_pid) == 64);
static_assert(offsetof(RingHeader, indices_offset) == 72);

// Batch claims. `claim` packs (plan tag : 16, batches claimed : 48) so that
// one CAS both checks the plan and takes the next batch; the trainer closes a
// plan by CASing in the next tag, which tells it exactly what was claimed.
struct alignas(kCacheLine) ClaimControl {
  std::atomic<uint64_t> claim;
  // Unconsumed batch ids below this are cancelled (an abandoned epoch).
  std::atomic<uint64_t> cancel_before;
  // Futex word, bumped whenever a plan is published or shutdown is set.
  std::atomic<uint32_t> plan_signal;
  std::atomic<uint32_t> shutdown;
  char padding[kCacheLine - 24];
};
static_assert(std::is_standard_layout_v<ClaimControl>);
static_assert(sizeof(ClaimControl) == 64);
static_assert(offsetof(ClaimControl, plan_signal) == 16);

inline constexpr int kClaimTagShift = 48;
inline constexpr uint64_t kClaimCountMask = (uint64_t{1} << kClaimTagShift) - 1;

// One epoch's batches: global batch ids [first_batch, first_batch + batch_count).
// Fields are atomics only so that a worker reading a plan the trainer is
// rewriting (for tag t+4) is not a data race; it then fails its claim CAS.
struct alignas(kCacheLine) Plan {
  std::atomic<uint64_t> tag;
  std::atomic<uint64_t> first_batch;
  std::atomic<uint64_t> batch_count;
  std::atomic<uint64_t> sample_count;  // samples in the epoch's order table
  std::atomic<uint64_t> epoch;
  std::atomic<uint64_t> order_table;   // 0 or 1
  char padding[kCacheLine - 48];
};
static_assert(std::is_standard_layout_v<Plan>);
static_assert(sizeof(Plan) == 64);
static_assert(offsetof(Plan, epoch) == 32);

// Batches to be produced again because the worker that had claimed them
// died or hung. The claim counter has moved past them, so without this queue
// nobody would fill them. Only the trainer pushes (an empty entry CAS'd to an
// id); any worker takes (CAS from the id back to empty), before it claims new
// batches. An entry holds kNoBatch when empty.
inline constexpr uint32_t kRedoEntries = 8;
struct alignas(kCacheLine) RedoQueue {
  std::atomic<uint64_t> batch[kRedoEntries];
};
static_assert(std::is_standard_layout_v<RedoQueue>);
static_assert(sizeof(RedoQueue) == 64);

// Slot phases, in the low bits of the slot's state word. The high bits hold
// the generation (batch id / K, modulo 2^29) the phase refers to, so a stale
// wake can never be mistaken for the batch a process waits for.
enum SlotPhase : uint32_t {
  kFree = 0,     // may be filled with batch `generation * K + slot`
  kFilling = 1,  // a worker (filler) is writing it
  kReady = 2,    // complete; the trainer may take it
  kFailed = 3,   // the filler hit an error; see error fields
  kLeased = 4,   // taken by the trainer; tensors alias it until released
};
inline constexpr uint32_t kPhaseBits = 3;
inline constexpr uint32_t kPhaseMask = (1u << kPhaseBits) - 1;
inline constexpr uint32_t kGenerationMask = 0xffffffffu >> kPhaseBits;

enum class ErrorKind : uint32_t { kNone = 0, kIo = 1, kDecode = 2, kOther = 3 };

struct alignas(kCacheLine) SlotControl {
  std::atomic<uint32_t> state;   // futex word: generation << 3 | phase
  std::atomic<int32_t> filler;   // worker index filling it, -1 = trainer
  std::atomic<uint64_t> batch_id;
  // Written by the filler before it publishes kReady/kFailed (release), read
  // by the trainer after it observes that phase (acquire).
  uint32_t sample_count;
  uint32_t error_kind;
  int64_t error_sample;
  uint64_t epoch;
  char padding[kCacheLine - 40];
  char error_text[kErrorTextBytes];
  char padding2[512 - kCacheLine - kErrorTextBytes];
};
static_assert(std::is_standard_layout_v<SlotControl>);
static_assert(sizeof(SlotControl) == 512);
static_assert(offsetof(SlotControl, sample_count) == 16);
static_assert(offsetof(SlotControl, error_text) == 64);

// One per worker process: identity, liveness and where its time went.
// `current_batch` is written *before* the claim or redo CAS that takes the
// batch (an intent), so a worker that dies right after its CAS still names
// the batch it owned; the trainer cross-checks intents against the slot
// states before it re-queues anything (loader/trainer/worker_recovery.cc).
// A replacement worker reuses the entry: the counters keep adding up.
struct alignas(kCacheLine) WorkerControl {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> ready;          // 1 once the worker has started
  // CLOCK_MONOTONIC, stored whenever the worker waits and before each
  // sample: a worker whose heartbeat is older than the hang timeout is
  // stuck inside one sample (a dead network mount, a looping decoder).
  std::atomic<uint64_t> heartbeat_ns;
  std::atomic<uint64_t> current_batch;  // id claimed or being claimed, or kNoBatch
  std::atomic<uint64_t> batches;
  std::atomic<uint64_t> samples;
  std::atomic<uint64_t> read_ns;
  std::atomic<uint64_t> decode_ns;
  std::atomic<uint64_t> transform_ns;
  std::atomic<uint64_t> slot_wait_ns;
  // Dataset index of the sample last started (-1: none): names the culprit
  // when the worker dies or hangs inside a decoder.
  std::atomic<int64_t> current_sample;
  std::atomic<uint64_t> skipped;        // bad samples replaced (on_error=skip)
  // Shards this worker fetched into the shard cache, and their bytes.
  std::atomic<uint64_t> shard_fetches;
  std::atomic<uint64_t> shard_bytes_fetched;
  // 1: the trainer retires this worker (the autotuner found it useless): it
  // claims no further batch, finishes the one it holds, and exits with 0.
  std::atomic<uint32_t> retire;
  char padding[2 * kCacheLine - 108];
};
static_assert(std::is_standard_layout_v<WorkerControl>);
static_assert(sizeof(WorkerControl) == 128);
static_assert(offsetof(WorkerControl, read_ns) == 40);
static_assert(offsetof(WorkerControl, current_sample) == 72);
static_assert(offsetof(WorkerControl, shard_fetches) == 88);
static_assert(offsetof(WorkerControl, retire) == 104);

inline constexpr uint64_t kNoBatch = ~uint64_t{0};

// Lock-free atomics are required: they live in memory two processes map.
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<int64_t>::is_always_lock_free);

}  // namespace ringloader::ring
