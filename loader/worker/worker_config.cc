// SPDX-License-Identifier: BSD-3-Clause
#include "loader/worker/worker_config.h"

#include "ringloader/errors.h"

namespace ringloader::worker {

std::string WorkerConfig::to_json_text() const {
  nlohmann::json out;
  out["dataset"] = dataset.to_json();
  out["pipeline"] = pipeline.to_json();
  out["seed"] = seed;
  out["intra_op_threads"] = intra_op_threads;
  out["worker_nice"] = worker_nice;
  out["max_image_pixels"] = max_image_pixels;
  out["on_error"] = skip_bad_samples ? "skip" : "raise";
  return out.dump();
}

WorkerConfig WorkerConfig::from_json_text(const std::string& text) {
  WorkerConfig config;
  try {
    nlohmann::json in = nlohmann::json::parse(text);
    config.dataset = Dataset::from_json(in.at("dataset"));
    config.pipeline = Pipeline::from_json(in.at("pipeline"));
    config.seed = in.at("seed").get<uint64_t>();
    config.intra_op_threads = in.at("intra_op_threads").get<int>();
    config.worker_nice = in.value("worker_nice", 0);
    config.max_image_pixels = in.at("max_image_pixels").get<int64_t>();
    config.skip_bad_samples = in.value("on_error", "raise") == "skip";
  } catch (const nlohmann::json::exception& error) {
    throw Error(std::string("ringloader: malformed worker configuration: ") +
                error.what());
  }
  return config;
}

}  // namespace ringloader::worker
