// SPDX-License-Identifier: BSD-3-Clause
// Batches produced by workers that are not ringloader's own C++ workers:
// the Python package uses this to run any map-style Python Dataset in
// spawned Python processes that write samples straight into the ring.
//
// Trainer side: a Loader built from ExternalWorkers spawns `command` (with
// the ring arguments appended) and yields batches whose `data` is the raw
// slot, uint8 [batch_size * sample_bytes]; the producer and consumer agree
// on its layout. Worker side: WorkerEndpoint speaks the ring protocol.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ringloader/export.h"
#include "ringloader/dataset.h"

namespace ringloader {

struct RINGLOADER_EXPORT ExternalWorkers {
  // argv of a worker, e.g. {"/usr/bin/python3", "-m", "ringloader._worker"};
  // "--ring-fd 3 --config-fd 4 --index I --parent-pid P" is appended.
  std::vector<std::string> command;
  // Opaque bytes every worker can read from fd 4 (e.g. a pickled dataset).
  std::string config;
  int64_t dataset_size = 0;
  // Bytes of one sample in the slot. A batch's slot holds batch_size of them.
  uint64_t sample_bytes = 0;
  // A weighted mix over these samples (Dataset::mix's parts, shards 0):
  // the built-in sampler then draws each epoch from it. Default: empty.
  std::vector<MixPart> mix;
};

// One worker's connection to the ring it was spawned with.
class RINGLOADER_EXPORT WorkerEndpoint {
 public:
  struct Task {
    uint64_t batch_id = 0;
    int64_t epoch = 0;
    int64_t index = 0;              // batch index within the epoch
    std::vector<int64_t> samples;   // dataset indices, in slot order
  };

  // Maps the ring from the inherited fd. Exits the process quietly if the
  // trainer (parent_pid) is already gone.
  WorkerEndpoint(int ring_fd, int worker_index, int parent_pid);
  ~WorkerEndpoint();

  // Blocks until there is a batch to fill and its slot is free, then returns
  // it (slot taken). nullopt when the trainer shuts down or has died.
  std::optional<Task> next_task();
  // From now on next_task() takes only the batches torch's DataLoader would
  // deal this worker: those whose index in the epoch is worker_index modulo
  // worker_count (round-robin from worker 0 at each epoch), so that a
  // worker's random state sees torch's sequence of batches (seeding="torch").
  // A dead worker's batch is still re-done by any worker. Throws
  // std::invalid_argument unless worker_index < worker_count. Default: any
  // batch (claimed by whichever worker is free). Not thread-safe: call it
  // before next_task(), from the thread that calls that.
  void deal_round_robin(int worker_count);
  // The slot's memory for `task`: slot_bytes() writable bytes.
  uint8_t* slot_data(const Task& task) const;
  uint64_t slot_bytes() const;
  // READY: the trainer may take the batch.
  void publish(const Task& task);
  // FAILED: the trainer raises `message` (naming the sample) for this batch.
  void fail(const Task& task, int64_t sample, const std::string& message);
  // Call before each sample: the trainer treats a worker whose last call is
  // older than LoaderOptions::hang_timeout_s as hung (kills and replaces it,
  // and re-does its batch), and names `sample` if it dies or hangs there.
  void heartbeat(int64_t sample = -1);
  // Seconds spent reading / transforming, for the trainer's stats().
  void add_times(double read_s, double transform_s);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ringloader
