#include "loader/worker/batch_filler.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "loader/ring/futex.h"
#include "ringloader/errors.h"
#include "ringloader/random.h"

namespace ringloader::worker {

struct BatchFiller::Failure {
  uint64_t position = ~uint64_t{0};  // within the batch; lowest wins
  int64_t sample = -1;
  ring::ErrorKind kind = ring::ErrorKind::kNone;
  std::string message;
};

struct ThreadScratch {
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

BatchFiller::BatchFiller(const WorkerConfig& config, const ring::Ring& ring,
                         int worker_index)
    : ring_(ring),
      protocol_(ring),
      worker_index_(worker_index),
      seed_(config.seed),
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
    fill_samples(claim, begin, end, ring_.slot_data(index),
                 ring_.slot_targets(index));
  } catch (const Failure& failure) {
    record_failure(slot, failure);
    protocol_.publish(claim.batch_id, ring::kFailed);
    return;
  }
  ring::WorkerControl& control = ring_.worker(static_cast<uint32_t>(worker_index_));
  control.batches.fetch_add(1, std::memory_order_relaxed);
  control.samples.fetch_add(end - begin, std::memory_order_relaxed);
  protocol_.publish(claim.batch_id, ring::kReady);  // release + wake
}

void BatchFiller::fill_samples(const ring::Claim& claim, uint64_t begin,
                               uint64_t end, uint8_t* data, int64_t* targets) {
  const std::atomic<int64_t>* order = ring_.order_table(claim.order_table);
  const uint64_t sample_bytes = ring_.geometry().sample_bytes;
  std::mutex failure_mutex;
  Failure failure;
  auto fill_one = [&](uint64_t position) {
    ThreadScratch& scratch = scratch_->per_thread.local();
    // Relaxed: the order table was published before the plan (release) that
    // the claim acquired.
    int64_t sample = order[begin + position].load(std::memory_order_relaxed);
    try {
      SampleRng rng(seed_, claim.epoch, static_cast<uint64_t>(sample));
      targets[position] = source_.load(sample, scratch.image, scratch.file_bytes,
                                       scratch.timing, pipeline_.region_planner(rng));
      uint64_t start = ring::monotonic_ns();
      pipeline_.run(scratch.image, scratch.scratch, rng,
                    data + position * sample_bytes);
      scratch.transform_ns += ring::monotonic_ns() - start;
    } catch (const std::exception& error) {
      ring::ErrorKind kind = dynamic_cast<const DecodeError*>(&error)
                                 ? ring::ErrorKind::kDecode
                             : dynamic_cast<const IoError*>(&error)
                                 ? ring::ErrorKind::kIo
                                 : ring::ErrorKind::kOther;
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (position < failure.position) {
        failure = {position, sample, kind, error.what()};
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
  ring::WorkerControl& control = ring_.worker(static_cast<uint32_t>(worker_index_));
  for (ThreadScratch& scratch : scratch_->per_thread) {
    control.read_ns.fetch_add(scratch.timing.read_ns, std::memory_order_relaxed);
    control.decode_ns.fetch_add(scratch.timing.decode_ns, std::memory_order_relaxed);
    control.transform_ns.fetch_add(scratch.transform_ns, std::memory_order_relaxed);
    scratch.timing = {};
    scratch.transform_ns = 0;
  }
  if (failure.kind != ring::ErrorKind::kNone) throw failure;
}

void BatchFiller::record_failure(ring::SlotControl& slot,
                                 const Failure& failure) {
  slot.error_kind = static_cast<uint32_t>(failure.kind);
  slot.error_sample = failure.sample;
  std::string text = failure.message;
  if (text.find("sample " + std::to_string(failure.sample)) == std::string::npos) {
    text = source_.describe(failure.sample) + ": " + text;
  }
  size_t n = std::min(text.size(), ring::kErrorTextBytes - 1);
  std::memcpy(slot.error_text, text.data(), n);
  slot.error_text[n] = '\0';
}

}  // namespace ringloader::worker
