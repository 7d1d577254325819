// SPDX-License-Identifier: BSD-3-Clause
// Tar shards vs ImageFolder on the same images, one run, side by side:
//
//   ringloader-tar-bench --root PHOTOS --shards 'SHARDS/photos-{0000..0009}.tar'
//       [--epochs 2] [--rounds 2] [--workers 2] [--batch-size 64]
//
// The shards hold the same JPEG bytes as the folder (ringloader-shard).
// Each round times the folder, the local shards, then the shards through
// "pipe:cat" (an object-store stand-in), after one warm-up epoch each, so
// the page cache is warm for all three. Prints JSON (stdout) and a table
// with the ratios (stderr).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringloader/ringloader.h"

namespace {

using Clock = std::chrono::steady_clock;

std::map<std::string, std::string> parse(int argc, char** argv) {
  std::map<std::string, std::string> values;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0) throw ringloader::OptionError("bad argument " + key);
    values[key.substr(2)] = argv[i + 1];
  }
  if (!values.count("root") || !values.count("shards")) {
    throw ringloader::OptionError("--root and --shards are required");
  }
  return values;
}

long integer(const std::map<std::string, std::string>& values, const char* key,
             long fallback) {
  auto it = values.find(key);
  return it == values.end() ? fallback : std::stol(it->second);
}

struct Rate {
  double images_per_s = 0;
  double read_us_per_image = 0;  // workers' time getting the encoded bytes
};

// Images per second over `epochs` shuffled epochs after one warm-up epoch.
Rate images_per_s(const ringloader::Dataset& dataset,
                    const ringloader::LoaderOptions& options, int epochs) {
  ringloader::Pipeline pipeline{
      ringloader::RandomResizedCrop(224), ringloader::RandomHorizontalFlip(),
      ringloader::ToTensor(),
      ringloader::Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})};
  ringloader::Loader loader(dataset, pipeline, options);
  double sink = 0;
  for (ringloader::Batch& batch : loader) sink += batch.data.data_ptr<float>()[0];
  int64_t images = 0;
  const double read_before = loader.stats().read_s;
  auto start = Clock::now();
  for (int e = 0; e < epochs; ++e) {
    for (ringloader::Batch& batch : loader) {
      sink += batch.data.data_ptr<float>()[0];
      images += batch.data.size(0);
    }
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (sink == 12345.678) std::fprintf(stderr, " ");  // keeps the reads
  return {images / seconds, (loader.stats().read_s - read_before) / images * 1e6};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int run(const std::map<std::string, std::string>& values) {
  const std::string pattern = values.at("shards");
  ringloader::LoaderOptions options;
  options.batch_size = integer(values, "batch-size", 64);
  options.num_workers = static_cast<int>(integer(values, "workers", 2));
  options.shuffle = true;
  const int epochs = static_cast<int>(integer(values, "epochs", 2));
  const int rounds = static_cast<int>(integer(values, "rounds", 2));

  auto index_start = Clock::now();
  ringloader::Dataset shards = ringloader::Dataset::tar_shards({pattern});
  double index_s = std::chrono::duration<double>(Clock::now() - index_start).count();
  index_start = Clock::now();
  ringloader::Dataset piped = ringloader::Dataset::tar_shards({"pipe:cat " + pattern});
  double pipe_index_s = std::chrono::duration<double>(Clock::now() - index_start).count();
  ringloader::Dataset folder = ringloader::Dataset::image_folder(values.at("root"));

  std::vector<double> folder_rates, shard_rates, pipe_rates;
  std::vector<double> folder_read, shard_read, pipe_read;
  for (int r = 0; r < rounds; ++r) {
    Rate f = images_per_s(folder, options, epochs);
    Rate s = images_per_s(shards, options, epochs);
    Rate p = images_per_s(piped, options, epochs);
    folder_rates.push_back(f.images_per_s);
    shard_rates.push_back(s.images_per_s);
    pipe_rates.push_back(p.images_per_s);
    folder_read.push_back(f.read_us_per_image);
    shard_read.push_back(s.read_us_per_image);
    pipe_read.push_back(p.read_us_per_image);
  }
  double load[1] = {0};
  getloadavg(load, 1);
  nlohmann::json out = {
      {"workload", "tar_shards"}, {"dataset_size", shards.size()},
      {"shards", shards.shard_sizes().size()}, {"shuffle_buffer", shards.shuffle_buffer()},
      {"batch_size", options.batch_size}, {"num_workers", options.num_workers},
      {"epochs", epochs}, {"rounds", rounds},
      {"index_s", index_s}, {"pipe_index_s", pipe_index_s},
      {"folder_images_per_s", median(folder_rates)},
      {"shards_images_per_s", median(shard_rates)},
      {"pipe_images_per_s", median(pipe_rates)},
      {"folder_rounds", folder_rates}, {"shards_rounds", shard_rates},
      {"pipe_rounds", pipe_rates},
      {"folder_read_us_per_image", median(folder_read)},
      {"shards_read_us_per_image", median(shard_read)},
      {"pipe_read_us_per_image", median(pipe_read)},
      {"load_average", load[0]}};
  std::printf("%s\n", out.dump().c_str());
  const double f = median(folder_rates), s = median(shard_rates), p = median(pipe_rates);
  std::fprintf(stderr,
               "tar shards vs ImageFolder (%lld images, %zu shards, %d workers, median of %d)\n"
               "  ImageFolder        %8.0f img/s              read %6.1f us/image\n"
               "  tar shards (local) %8.0f img/s  ratio %.2fx  read %6.1f us/image  index %.3f s\n"
               "  tar shards (pipe:) %8.0f img/s  ratio %.2fx  read %6.1f us/image  index %.3f s\n",
               static_cast<long long>(shards.size()), shards.shard_sizes().size(),
               options.num_workers, rounds, f, median(folder_read), s, s / f,
               median(shard_read), index_s, p, p / f, median(pipe_read), pipe_index_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ringloader-tar-bench: %s\n", error.what());
    return 1;
  }
}
