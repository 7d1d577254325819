// SPDX-License-Identifier: BSD-3-Clause
// Where one sample's time goes in a whole pipeline, one thread, as a worker
// runs it: each prefix of the pipeline's ops compiled once and run on every
// photo (decode of the first op's region included) into a reused
// destination, so the difference between two prefixes is what the op adds.
// A "decode" row times the region decode alone. bench/recipes.py's --profile
// goes through apply_pipeline, which compiles the pipeline and allocates the
// output for every sample; this does not, so its tail rows (ToTensor,
// RandomErasing) are what a worker pays.
//
//   ringloader-pipeline-bench [--rounds N] [--whole] PIPELINE.json JPEG...
// (recipes.py --profile N --dump DIR writes each row's pipeline JSON.)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringloader/errors.h"
#include "transforms/compiled_pipeline.h"

using namespace ringloader;
using namespace ringloader::transforms;

namespace {

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

using Photos = std::vector<std::vector<uint8_t>>;

// This thread's CPU time: on a machine shared with other jobs, wall time
// counts their share too.
double thread_cpu_us() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return now.tv_sec * 1e6 + now.tv_nsec / 1e3;
}

// Median over `rounds` of the mean µs per photo; `run_ops` false: decode only.
double time_prefix(const CompiledPipeline& compiled, const Photos& photos, int rounds,
                   bool run_ops) {
  std::vector<uint8_t> destination(compiled.output_shape().bytes());
  Image image, scratch;
  std::vector<double> per_round;
  for (int r = 0; r < rounds; ++r) {
    const double start = thread_cpu_us();
    for (size_t i = 0; i < photos.size(); ++i) {
      SampleRng rng(0, static_cast<uint64_t>(r), i);
      decode_image(photos[i].data(), photos[i].size(), ColorMode::kRGB, "photo", image, {},
                   compiled.region_planner(rng));
      if (run_ops) compiled.run(image, scratch, rng, destination.data());
    }
    per_round.push_back((thread_cpu_us() - start) / photos.size());
  }
  std::sort(per_round.begin(), per_round.end());
  return per_round[per_round.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3;
  bool whole_only = false;  // --whole: the whole pipeline only (for perf record)
  std::vector<const char*> paths;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--whole")) {
      whole_only = true;
    } else {
      paths.push_back(argv[i]);
    }
  }
  if (paths.size() < 2) {
    std::fprintf(stderr, "usage: %s [--rounds N] [--whole] PIPELINE.json JPEG...\n", argv[0]);
    return 2;
  }
  std::ifstream json_file(paths[0]);
  const nlohmann::json ops = nlohmann::json::parse(json_file);
  Photos photos;
  for (size_t i = 1; i < paths.size(); ++i) photos.push_back(read_file(paths[i]));
  std::printf("| prefix ends with | CPU us per photo (median of %d rounds over %zu photos) | "
              "this op adds |\n|---|---|---|\n", rounds, photos.size());
  double previous = 0;
  for (size_t k = whole_only ? ops.size() : 1; k <= ops.size(); ++k) {
    const Pipeline prefix = Pipeline::from_json(nlohmann::json(
        std::vector<nlohmann::json>(ops.begin(), ops.begin() + static_cast<long>(k))));
    std::unique_ptr<CompiledPipeline> compiled;
    try {
      compiled = std::make_unique<CompiledPipeline>(prefix, ColorMode::kRGB);
    } catch (const Error& error) {  // e.g. a prefix that ends before its crop
      std::printf("| %s | - (%s) | |\n", ops[k - 1]["op"].get<std::string>().c_str(),
                  error.what());
      continue;
    }
    if (k == 1 && !whole_only) {
      previous = time_prefix(*compiled, photos, rounds, false);
      std::printf("| decode (the first op's region) | %.0f | %.0f |\n", previous, previous);
    }
    const double spent = time_prefix(*compiled, photos, rounds, true);
    std::printf("| %s | %.0f | %.0f |\n", ops[k - 1]["op"].get<std::string>().c_str(), spent,
                spent - previous);
    previous = spent;
  }
  return 0;
}
