// Where samples come from. A Dataset is a description the trainer resolves
// once (folders are scanned, files listed) and ships to workers as data, so
// every process sees the same samples in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringloader/transforms.h"

namespace ringloader {

// One sample of a file-backed dataset: an encoded image and its label.
struct FileSample {
  std::string path;
  int64_t label = 0;
};

class Dataset {
 public:
  // torchvision.datasets.ImageFolder: root/<class>/<image>; classes are the
  // sub-folder names sorted by byte order, labels their positions; files are
  // sorted within a class. Accepts torchvision's IMG_EXTENSIONS
  // (case-insensitive). Throws IoError for a missing or empty folder.
  static Dataset image_folder(const std::string& root,
                              ColorMode mode = ColorMode::kRGB);

  // An explicit list of (path, label). Paths are used as given.
  static Dataset file_list(std::vector<FileSample> samples,
                           ColorMode mode = ColorMode::kRGB);

  // A text file of "<path> <label>" lines; relative paths are resolved
  // against the list file's folder.
  static Dataset file_list(const std::string& list_path,
                           ColorMode mode = ColorMode::kRGB);

  // MNIST-style IDX files (images idx3-ubyte, labels idx1-ubyte), plain or
  // gzip-compressed, e.g. Debian's /usr/share/datasets/fashion-mnist.
  // Images are 8-bit grayscale ("L"), like torchvision.datasets.MNIST.
  static Dataset idx(const std::string& images_path,
                     const std::string& labels_path);

  int64_t size() const;
  // Class names for image_folder (index = label); empty otherwise.
  const std::vector<std::string>& classes() const { return classes_; }
  ColorMode color_mode() const { return mode_; }
  // Fixed image size (height, width) when every sample has it (IDX), else 0.
  int image_height() const { return image_height_; }
  int image_width() const { return image_width_; }

  // The resolved description that workers rebuild the dataset from.
  nlohmann::json to_json() const;
  static Dataset from_json(const nlohmann::json& description);

  const std::vector<FileSample>& files() const { return files_; }
  const std::string& idx_images_path() const { return idx_images_; }
  const std::string& idx_labels_path() const { return idx_labels_; }

 private:
  enum class Kind { kFiles, kIdx };
  Kind kind_ = Kind::kFiles;
  ColorMode mode_ = ColorMode::kRGB;
  std::vector<FileSample> files_;
  std::vector<std::string> classes_;
  std::string idx_images_, idx_labels_;
  int64_t idx_count_ = 0;
  int image_height_ = 0, image_width_ = 0;
};

}  // namespace ringloader
