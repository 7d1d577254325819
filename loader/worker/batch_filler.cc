// SPDX-License-Identifier: BSD-3-Clause
#include "loader/worker/batch_filler.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "loader/ring/futex.h"
#include "loader/ring/slot_validation.h"
#include "ringloader/errors.h"
#include "ringloader/random.h"

namespace ringloader::worker {

struct BatchFiller::Failure {
  uint64_t position = ~uint64_t{0};  // within the batch; lowest wins
  int64_t sample = -1;
  ring::ErrorKind kind = ring::ErrorKind::kNone;
  std::string message;
};

struct BatchFiller::ThreadScratch {
  transforms::Image image;
  transforms::Image scratch;
  std::vector<uint8_t> file_bytes;
  data::SampleTiming timing;
  uint64_t transform_ns = 0;
};

struct BatchFiller::Scratch {
  tbb::enumerable_thread_specific<ThreadScratch> per_thread;
  std::unique_ptr<tbb::task_arena> arena;
};

namespace {

// Keeps substitute draws apart from every other stream keyed by the sample.
constexpr uint32_t kSubstituteStream = 0x5b57;

ring::ErrorKind kind_of(const std::exception& error) {
  if (dynamic_cast<const DecodeError*>(&error)) return ring::ErrorKind::kDecode;
  if (dynamic_cast<const IoError*>(&error)) return ring::ErrorKind::kIo;
  return ring::ErrorKind::kOther;
}

}  // namespace

int64_t substitute_sample(uint64_t seed, uint64_t epoch, int64_t sample,
                          int attempt, int64_t dataset_size) {
  SampleRng rng(seed, epoch, static_cast<uint64_t>(sample), kSubstituteStream);
  int64_t pick = sample;
  for (int i = 0; i < attempt; ++i) pick = rng.integer(0, dataset_size - 1);
  return pick;
}

BatchFiller::BatchFiller(const WorkerConfig& config, const ring::Ring& ring,
                         int worker_index)
    : ring_(ring),
      protocol_(ring),
      worker_index_(worker_index),
      control_(ring.worker(static_cast<uint32_t>(worker_index))),
      seed_(config.seed),
      skip_bad_samples_(config.skip_bad_samples),
      threads_(std::max(1, config.intra_op_threads)),
      source_(config.dataset,
              transforms::DecodeLimits{config.max_image_pixels}),
      pipeline_(config.pipeline, config.dataset.color_mode(),
                config.dataset.image_height(), config.dataset.image_width()),
      scratch_(std::make_unique<Scratch>()) {
  if (pipeline_.output_shape().bytes() != ring.geometry().sample_bytes) {
    throw Error("ringloader: worker pipeline writes " +
                std::to_string(pipeline_.output_shape().bytes()) +
                " bytes per sample but the ring holds " +
                std::to_string(ring.geometry().sample_bytes));
  }
  if (threads_ > 1) scratch_->arena = std::make_unique<tbb::task_arena>(threads_);
}

BatchFiller::~BatchFiller() = default;

void BatchFiller::fill(const ring::Claim& claim) {
  const auto& geometry = ring_.geometry();
  const uint32_t index = ring::slot_of(claim.batch_id, geometry.slot_count);
  ring::SlotControl& slot = ring_.slot(index);
  const uint64_t begin = claim.local_index * geometry.batch_size;
  const uint64_t end = std::min<uint64_t>(begin + geometry.batch_size,
                                          claim.sample_count);
  slot.filler.store(worker_index_, std::memory_order_relaxed);
  slot.batch_id.store(claim.batch_id, std::memory_order_relaxed);
  slot.epoch = claim.epoch;
  slot.sample_count = static_cast<uint32_t>(end > begin ? end - begin : 0);
  slot.error_kind = static_cast<uint32_t>(ring::ErrorKind::kNone);
  slot.error_sample = -1;
  slot.error_text[0] = '\0';
  try {
    fill_samples(claim, begin, end, index);
  } catch (const Failure& failure) {
    record_failure(slot, failure);
    control_.current_sample.store(-1, std::memory_order_relaxed);
    protocol_.publish(claim.batch_id, ring::kFailed);
    return;
  }
  control_.current_sample.store(-1, std::memory_order_relaxed);
  control_.batches.fetch_add(1, std::memory_order_relaxed);
  control_.samples.fetch_add(end - begin, std::memory_order_relaxed);
  protocol_.publish(claim.batch_id, ring::kReady);  // release + wake
}

void BatchFiller::run_one(const ring::Claim& claim, int64_t sample,
                          ThreadScratch& scratch, uint8_t* destination,
                          int64_t& target) {
  // The heartbeat before each sample is what the trainer's hang detection
  // measures: one sample that takes longer than the timeout is a hang.
  control_.heartbeat_ns.store(ring::monotonic_ns(), std::memory_order_relaxed);
  control_.current_sample.store(sample, std::memory_order_relaxed);
  if (source_.copies_rows()) {  // no decode, no pipeline: the row is the sample
    target = source_.copy_row(sample, destination);
    return;
  }
  SampleRng rng(seed_, claim.epoch, source_.random_key(sample));
  target = source_.load(sample, scratch.image, scratch.file_bytes, scratch.timing,
                        pipeline_.region_planner(rng));
  uint64_t start = ring::monotonic_ns();
  pipeline_.run(scratch.image, scratch.scratch, rng, destination);
  scratch.transform_ns += ring::monotonic_ns() - start;
}

int64_t BatchFiller::load_one(const ring::Claim& claim, int64_t sample,
                              ThreadScratch& scratch, uint8_t* destination,
                              int64_t& target) {
  if (!skip_bad_samples_) {
    run_one(claim, sample, scratch, destination, target);
    return sample;
  }
  std::string first_error;
  for (int attempt = 0; attempt <= kMaxSubstitutes; ++attempt) {
    int64_t candidate =
        substitute_sample(seed_, claim.epoch, sample, attempt, source_.size());
    try {
      run_one(claim, candidate, scratch, destination, target);
      if (attempt > 0) report_skip(sample, candidate, first_error);
      return candidate;
    } catch (const std::exception& error) {
      if (attempt == 0) first_error = error.what();
    }
  }
  throw IoError(first_error + "; and the " + std::to_string(kMaxSubstitutes) +
                " substitutes on_error=skip tried failed too");
}

void BatchFiller::report_skip(int64_t sample, int64_t substitute,
                              const std::string& why) {
  control_.skipped.fetch_add(1, std::memory_order_relaxed);
  // The log half of a "counted, reported skip"; the count is in stats().
  const std::string prefix = "ringloader: ";
  std::string what = why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why;
  if (what.find("sample " + std::to_string(sample)) == std::string::npos) {
    what = source_.describe(sample) + ": " + what;
  }
  std::string line = "ringloader: skipped " + what + " (on_error=skip: " +
                     source_.describe(substitute) + " takes its place)\n";
  // One write(2): lines from several workers never interleave mid-line.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void BatchFiller::fill_samples(const ring::Claim& claim, uint64_t begin,
                               uint64_t end, uint32_t slot_index) {
  const uint64_t sample_bytes = ring_.geometry().sample_bytes;
  uint8_t* data = ring_.slot_data(slot_index);
  int64_t* targets = ring_.slot_targets(slot_index);
  int64_t* indices = ring_.slot_sample_indices(slot_index);
  std::mutex failure_mutex;
  Failure failure;
  auto fill_one = [&](uint64_t position) {
    ThreadScratch& scratch = scratch_->per_thread.local();
    // The order table was published before the plan (release) that the
    // claim acquired.
    int64_t sample = ring_.order_entry(claim.order_table, begin + position);
    try {
      indices[position] = load_one(claim, sample, scratch,
                                   data + position * sample_bytes,
                                   targets[position]);
    } catch (const std::exception& error) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (position < failure.position) {
        failure = {position, sample, kind_of(error), error.what()};
      }
    }
  };
  const uint64_t count = end - begin;
  if (scratch_->arena && count > 1) {
    scratch_->arena->execute([&] {
      tbb::parallel_for(uint64_t{0}, count, fill_one);
    });
  } else {
    for (uint64_t position = 0; position < count; ++position) fill_one(position);
  }
  for (ThreadScratch& scratch : scratch_->per_thread) {
    control_.read_ns.fetch_add(scratch.timing.read_ns, std::memory_order_relaxed);
    control_.decode_ns.fetch_add(scratch.timing.decode_ns, std::memory_order_relaxed);
    control_.transform_ns.fetch_add(scratch.transform_ns, std::memory_order_relaxed);
    scratch.timing = {};
    scratch.transform_ns = 0;
  }
  publish_fetch_counts();
  if (failure.kind != ring::ErrorKind::kNone) throw failure;
}

// Deltas: a replacement worker adds to what its predecessor counted.
void BatchFiller::publish_fetch_counts() {
  const auto fetches = static_cast<uint64_t>(source_.shard_fetches());
  const uint64_t bytes = source_.shard_bytes_fetched();
  control_.shard_fetches.fetch_add(fetches - fetches_published_, std::memory_order_relaxed);
  control_.shard_bytes_fetched.fetch_add(bytes - bytes_published_,
                                         std::memory_order_relaxed);
  fetches_published_ = fetches;
  bytes_published_ = bytes;
}

void BatchFiller::record_failure(ring::SlotControl& slot,
                                 const Failure& failure) {
  slot.error_kind = static_cast<uint32_t>(failure.kind);
  slot.error_sample = failure.sample;
  std::string text = failure.message;
  if (text.find("sample " + std::to_string(failure.sample)) == std::string::npos) {
    text = source_.describe(failure.sample) + ": " + text;
  }
  text = ring::fit_error_text(text);
  std::memcpy(slot.error_text, text.c_str(), text.size() + 1);
}

}  // namespace ringloader::worker
