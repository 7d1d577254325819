// SPDX-License-Identifier: BSD-3-Clause
#include "classifier/fashion_mnist_folder.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <opencv2/imgcodecs.hpp>
#include <ringloader/ringloader.h>

#include "classifier/options.h"

namespace classifier {
namespace fs = std::filesystem;
namespace {

constexpr const char* kMarker = "EXPORT_COMPLETE";
constexpr const char* kFolder = "fashion-mnist-png";

// Writes split/<class>/<index>.png for every image of one IDX pair.
int64_t export_split(const std::string& images, const std::string& labels,
                     const fs::path& split_dir) {
  const auto& classes = fashion_mnist_class_folders();
  for (const std::string& name : classes) fs::create_directories(split_dir / name);

  ringloader::Dataset dataset = ringloader::Dataset::idx(images, labels);
  ringloader::LoaderOptions options;
  options.batch_size = 1000;
  options.num_workers = 0;  // in-process: the work is a memcpy per image
  ringloader::Loader loader(dataset, ringloader::Pipeline{}, options);

  int64_t written = 0;
  char name[32];
  const std::vector<int> png_params = {cv::IMWRITE_PNG_COMPRESSION, 1};
  for (ringloader::Batch& batch : loader) {
    // No tensor op: uint8 HWC, [N, 28, 28, 1]; contiguous, aliasing the ring.
    torch::Tensor data = batch.data.contiguous();
    const int64_t n = data.size(0), h = data.size(1), w = data.size(2);
    auto targets = batch.target.accessor<int64_t, 1>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t label = targets[i];
      if (label < 0 || label >= static_cast<int64_t>(classes.size())) {
        throw UsageError("Fashion-MNIST label " + std::to_string(label) +
                         " out of range in " + labels);
      }
      cv::Mat image(static_cast<int>(h), static_cast<int>(w), CV_8UC1,
                    data[i].data_ptr<uint8_t>());
      std::snprintf(name, sizeof(name), "%05lld.png",
                    static_cast<long long>(batch.sample_indices[i]));
      fs::path path = split_dir / classes[label] / name;
      if (!cv::imwrite(path.string(), image, png_params)) {
        throw UsageError("cannot write " + path.string());
      }
      ++written;
    }
  }
  return written;
}

// Staging folders of runs that died mid-export ("<folder>.partial-<pid>").
void remove_abandoned_staging(const fs::path& cache_dir) {
  const std::string prefix = std::string(kFolder) + ".partial-";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    long pid = std::atol(name.c_str() + prefix.size());
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      fs::remove_all(entry.path(), ec);
    }
  }
}

}  // namespace

const std::vector<std::string>& fashion_mnist_class_folders() {
  static const std::vector<std::string> names = {
      "0_T-shirt_top", "1_Trouser", "2_Pullover", "3_Dress", "4_Coat",
      "5_Sandal",      "6_Shirt",   "7_Sneaker",  "8_Bag",   "9_Ankle_boot"};
  return names;
}

std::string display_class_name(const std::string& folder_name) {
  size_t cut = folder_name.find('_');
  if (cut == 0 || cut == std::string::npos) return folder_name;
  for (size_t i = 0; i < cut; ++i) {
    if (folder_name[i] < '0' || folder_name[i] > '9') return folder_name;
  }
  std::string name = folder_name.substr(cut + 1);
  if (name == "T-shirt_top") name = "T-shirt/top";
  for (char& c : name) {
    if (c == '_') c = ' ';
  }
  return name;
}

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/ringloader";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.cache/ringloader";
  }
  return ".cache/ringloader";
}

std::string ensure_fashion_mnist_png(const std::string& idx_dir,
                                     const std::string& cache_dir) {
  const fs::path root = fs::path(cache_dir) / kFolder;
  if (fs::exists(root / kMarker)) return root.string();

  const std::string base = idx_dir + "/";
  const std::string files[4] = {
      base + "train-images-idx3-ubyte.gz", base + "train-labels-idx1-ubyte.gz",
      base + "t10k-images-idx3-ubyte.gz", base + "t10k-labels-idx1-ubyte.gz"};
  for (const std::string& file : files) {
    if (!fs::exists(file)) {
      throw UsageError("missing " + file +
                       " (install Debian's dataset-fashion-mnist or pass "
                       "--fashion-mnist DIR)");
    }
  }

  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) throw UsageError("cannot create cache folder " + cache_dir + ": " + ec.message());
  remove_abandoned_staging(cache_dir);
  // An export without its marker was interrupted: start over.
  if (fs::exists(root)) {
    std::fprintf(stderr, "removing the incomplete export %s\n", root.c_str());
    fs::remove_all(root);
  }
  const fs::path staging = fs::path(cache_dir) /
      (std::string(kFolder) + ".partial-" + std::to_string(::getpid()));
  fs::remove_all(staging);

  std::fprintf(stderr, "exporting Fashion-MNIST to PNG files in %s ...\n",
               root.c_str());
  auto start = std::chrono::steady_clock::now();
  int64_t train = export_split(files[0], files[1], staging / "train");
  int64_t test = export_split(files[2], files[3], staging / "test");
  {
    std::ofstream marker(staging / kMarker);
    marker << "train " << train << "\ntest " << test << "\n";
    if (!marker.flush()) throw UsageError("cannot write " + (staging / kMarker).string());
  }
  fs::rename(staging, root, ec);
  if (ec) {
    // Another run finished its export first; use that one.
    fs::remove_all(staging);
    if (!fs::exists(root / kMarker)) {
      throw UsageError("cannot move " + staging.string() + " to " +
                       root.string() + ": " + ec.message());
    }
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "exported %lld train and %lld test images in %.1f s\n",
               static_cast<long long>(train), static_cast<long long>(test), seconds);
  return root.string();
}

}  // namespace classifier
