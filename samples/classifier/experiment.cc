// SPDX-License-Identifier: BSD-3-Clause
#include "classifier/experiment.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "classifier/fashion_mnist_folder.h"

namespace classifier {
namespace fs = std::filesystem;
namespace {

// A fixed random subset of `limit` samples (all when limit is 0), as a
// file_list Dataset built from the folder scan.
ringloader::Dataset subset(const ringloader::Dataset& full, int64_t limit,
                           uint64_t seed) {
  if (limit <= 0 || limit >= full.size()) return full;
  std::vector<ringloader::FileSample> files = full.files();
  std::mt19937_64 random(seed * 0x9E3779B97F4A7C15ull + 0x5EED);
  std::shuffle(files.begin(), files.end(), random);
  files.resize(static_cast<size_t>(limit));
  return ringloader::Dataset::file_list(std::move(files), full.color_mode());
}

std::vector<std::string> display_names(const std::vector<std::string>& folders) {
  std::vector<std::string> names;
  for (const std::string& folder : folders) names.push_back(display_class_name(folder));
  return names;
}

Experiment fashion_mnist(const Options& options) {
  std::string cache = options.cache.empty() ? default_cache_dir() : options.cache;
  std::string root = ensure_fashion_mnist_png(options.fashion_mnist_dir, cache);
  auto train = ringloader::Dataset::image_folder(root + "/train", ringloader::ColorMode::kGray);
  auto test = ringloader::Dataset::image_folder(root + "/test", ringloader::ColorMode::kGray);

  Experiment e;
  e.title = "Fashion-MNIST (" + root + ")";
  e.class_names = display_names(train.classes());
  e.train = subset(train, options.limit_train, options.seed);
  e.test = subset(test, options.limit_test, options.seed + 1);
  // Mean and standard deviation of the Fashion-MNIST training pixels.
  e.mean = {0.2860};
  e.std = {0.3530};
  e.train_pipeline = ringloader::Pipeline{
      ringloader::RandomCrop(28, 2), ringloader::RandomHorizontalFlip(),
      ringloader::ToTensor(), ringloader::Normalize(e.mean, e.std)};
  // CenterCrop(28) changes nothing on 28x28 images, but the Loader needs a
  // pipeline whose output size does not depend on the files it reads.
  e.test_pipeline = ringloader::Pipeline{ringloader::CenterCrop(28), ringloader::ToTensor(),
                                         ringloader::Normalize(e.mean, e.std)};
  e.model = make_small_cnn(1, static_cast<int>(e.class_names.size()));
  e.epochs = 12;
  e.peak_lr = 4e-3;
  e.weight_decay = 5e-4;
  return e;
}

Experiment image_folder(const Options& options) {
  const fs::path root = options.data;
  if (!fs::is_directory(root)) throw UsageError("--data: no folder " + root.string());
  if (!fs::is_directory(root / "train")) {
    throw UsageError("--data: " + root.string() + " has no train/ sub-folder");
  }
  fs::path test_dir = root / "val";
  if (!fs::is_directory(test_dir)) test_dir = root / "test";
  if (!fs::is_directory(test_dir)) {
    throw UsageError("--data: " + root.string() + " has neither val/ nor test/");
  }
  auto train = ringloader::Dataset::image_folder((root / "train").string());
  auto test = ringloader::Dataset::image_folder(test_dir.string());
  if (train.classes() != test.classes()) {
    throw UsageError("--data: the classes of " + (root / "train").string() +
                     " and " + test_dir.string() + " differ");
  }

  Experiment e;
  e.title = "ImageFolder " + root.string();
  e.class_names = display_names(train.classes());
  e.train = subset(train, options.limit_train, options.seed);
  e.test = subset(test, options.limit_test, options.seed + 1);
  e.mean = {0.485, 0.456, 0.406};
  e.std = {0.229, 0.224, 0.225};
  e.train_pipeline = ringloader::Pipeline{
      ringloader::RandomResizedCrop(224), ringloader::RandomHorizontalFlip(),
      ringloader::ToTensor(), ringloader::Normalize(e.mean, e.std)};
  e.test_pipeline = ringloader::Pipeline{
      ringloader::Resize(256), ringloader::CenterCrop(224),
      ringloader::ToTensor(), ringloader::Normalize(e.mean, e.std)};
  e.model = make_small_resnet(3, static_cast<int>(e.class_names.size()));
  e.epochs = 30;
  e.peak_lr = 2e-3;
  e.weight_decay = 0.05;
  return e;
}

}  // namespace

Experiment make_experiment(const Options& options) {
  const auto start = std::chrono::steady_clock::now();
  Experiment e = options.data.empty() ? fashion_mnist(options) : image_folder(options);
  e.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.epochs > 0) e.epochs = options.epochs;
  if (options.lr > 0) e.peak_lr = options.lr;
  return e;
}

}  // namespace classifier
