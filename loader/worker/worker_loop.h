// SPDX-License-Identifier: BSD-3-Clause
// A worker process's life: claim the next batch, wait for its slot, fill it,
// publish it; repeat across epochs until shutdown or the trainer is gone.
#pragma once

#include <memory>

#include "loader/ring/ring.h"
#include "loader/worker/batch_filler.h"

namespace ringloader::worker {

class WorkerLoop {
 public:
  WorkerLoop(std::shared_ptr<ring::Ring> ring, const WorkerConfig& config,
             int worker_index, int parent_pid);
  // Returns the process exit code: 0 on shutdown, 1 if the trainer vanished.
  int run();

 private:
  bool keep_going();
  void heartbeat();
  std::shared_ptr<ring::Ring> ring_;
  ring::SlotProtocol protocol_;
  ring::WorkerControl& control_;
  BatchFiller filler_;
  int parent_pid_;
  bool parent_gone_ = false;
};

}  // namespace ringloader::worker
