// SPDX-License-Identifier: BSD-3-Clause
// What a spawned worker needs to rebuild the trainer's pipeline: the resolved
// dataset, the pipeline description and the options that affect the bytes it
// writes. Travels as JSON in a sealed memfd inherited at spawn.
#pragma once

#include <cstdint>
#include <string>

#include "ringloader/dataset.h"
#include "ringloader/transforms.h"

namespace ringloader::worker {

struct WorkerConfig {
  Dataset dataset;
  Pipeline pipeline;
  uint64_t seed = 0;
  int intra_op_threads = 1;
  int worker_nice = 0;  // LoaderOptions::worker_nice
  int64_t max_image_pixels = 0;
  // on_error = skip: a sample that fails to load is replaced (see
  // substitute_sample in batch_filler.h) instead of failing its batch.
  bool skip_bad_samples = false;

  std::string to_json_text() const;
  static WorkerConfig from_json_text(const std::string& text);
};

}  // namespace ringloader::worker
