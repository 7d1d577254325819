// SPDX-License-Identifier: BSD-3-Clause
// Dataset descriptions: resolved once in the trainer, shipped to workers as
// JSON so every process agrees on the samples and their order.
#include "ringloader/dataset.h"

#include <fstream>
#include <sstream>

#include "loader/data/idx_file.h"
#include "loader/data/image_folder_scan.h"
#include "loader/data/tar_index.h"
#include "ringloader/errors.h"

namespace ringloader {
namespace {

const char* mode_name(ColorMode mode) {
  return mode == ColorMode::kGray ? "L" : "RGB";
}

ColorMode mode_from_name(const std::string& name) {
  if (name == "L") return ColorMode::kGray;
  if (name == "RGB") return ColorMode::kRGB;
  throw OptionError("ringloader: unknown color mode '" + name +
                    "' (expected \"RGB\" or \"L\")");
}

std::string folder_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

FileSample parse_list_line(const std::string& line, const std::string& base,
                           const std::string& list_path, size_t line_number) {
  // The label is the last field, so paths may contain spaces.
  size_t end = line.find_last_not_of(" \t\r");
  size_t split = line.find_last_of(" \t", end);
  auto fail = [&](const std::string& why) {
    return OptionError("ringloader: " + list_path + " line " +
                       std::to_string(line_number) + ": " + why);
  };
  if (split == std::string::npos) throw fail("expected \"<path> <label>\"");
  std::string path = line.substr(0, line.find_last_not_of(" \t", split) + 1);
  std::string label_text = line.substr(split + 1, end - split);
  size_t used = 0;
  int64_t label = 0;
  try {
    label = std::stoll(label_text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != label_text.size()) throw fail("label '" + label_text + "' is not an integer");
  if (!path.empty() && path[0] != '/') path = base + "/" + path;
  return {path, label};
}

}  // namespace

Dataset Dataset::image_folder(const std::string& root, ColorMode mode) {
  data::FolderScan scan = data::scan_image_folder(root);
  Dataset dataset = file_list(std::move(scan.samples), mode);
  dataset.classes_ = std::move(scan.classes);
  return dataset;
}

Dataset Dataset::file_list(std::vector<FileSample> samples, ColorMode mode) {
  if (samples.empty()) throw IoError("ringloader: the file list is empty");
  Dataset dataset;
  dataset.kind_ = Kind::kFiles;
  dataset.mode_ = mode;
  dataset.files_ = std::move(samples);
  return dataset;
}

Dataset Dataset::file_list(const std::string& list_path, ColorMode mode) {
  std::ifstream input(list_path);
  if (!input) throw IoError("ringloader: cannot read file list " + list_path);
  std::vector<FileSample> samples;
  std::string line;
  size_t line_number = 0;
  std::string base = folder_of(list_path);
  while (std::getline(input, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line[line.find_first_not_of(" \t")] == '#') continue;
    samples.push_back(parse_list_line(line, base, list_path, line_number));
  }
  if (samples.empty()) {
    throw IoError("ringloader: file list " + list_path + " lists no sample");
  }
  return file_list(std::move(samples), mode);
}

Dataset Dataset::idx(const std::string& images_path,
                     const std::string& labels_path) {
  auto image_dims = data::read_idx_dims(images_path);
  auto label_dims = data::read_idx_dims(labels_path);
  // (N, H, W) is grayscale (MNIST); (N, H, W, 3) is RGB in HWC order, as
  // torchvision's CIFAR keeps its arrays.
  const bool rgb = image_dims.size() == 4 && image_dims[3] == 3;
  if (image_dims.size() != 3 && !rgb) {
    throw OptionError("ringloader: IDX images " + images_path +
                      " must have 3 dimensions (N, H, W) or 4 (N, H, W, 3)");
  }
  if (label_dims.size() != 1 || label_dims[0] != image_dims[0]) {
    throw OptionError("ringloader: IDX labels " + labels_path + " hold " +
                      std::to_string(label_dims.empty() ? 0 : label_dims[0]) +
                      " labels for " + std::to_string(image_dims[0]) +
                      " images in " + images_path);
  }
  if (image_dims[0] == 0) throw IoError("ringloader: " + images_path + " is empty");
  Dataset dataset;
  dataset.kind_ = Kind::kIdx;
  dataset.mode_ = rgb ? ColorMode::kRGB : ColorMode::kGray;
  dataset.idx_images_ = images_path;
  dataset.idx_labels_ = labels_path;
  dataset.idx_count_ = image_dims[0];
  dataset.image_height_ = static_cast<int>(image_dims[1]);
  dataset.image_width_ = static_cast<int>(image_dims[2]);
  return dataset;
}

int64_t Dataset::size() const {
  if (kind_ == Kind::kTar) return static_cast<int64_t>(tar_->samples.size());
  return kind_ == Kind::kIdx ? idx_count_ : static_cast<int64_t>(files_.size());
}

namespace {

nlohmann::json mix_json(const std::vector<MixPart>& parts) {
  nlohmann::json out = nlohmann::json::array();
  for (const MixPart& part : parts) out.push_back({part.size, part.choose, part.shards});
  return out;
}

std::vector<MixPart> mix_from_json(const nlohmann::json& description) {
  std::vector<MixPart> parts;
  if (!description.contains("mix")) return parts;
  for (const auto& part : description.at("mix")) {
    parts.push_back({part.at(0).get<int64_t>(), part.at(1).get<int64_t>(),
                     part.at(2).get<int64_t>()});
  }
  return parts;
}

}  // namespace

nlohmann::json Dataset::to_json() const {
  nlohmann::json out;
  if (!mix_.empty()) out["mix"] = mix_json(mix_);
  if (kind_ == Kind::kTar) {
    out.update(tar_->to_json());
    out["kind"] = "tar";
    out["mode"] = mode_name(mode_);
    return out;
  }
  out["mode"] = mode_name(mode_);
  if (kind_ == Kind::kIdx) {
    out["kind"] = "idx";
    out["images"] = idx_images_;
    out["labels"] = idx_labels_;
    out["count"] = idx_count_;
    out["height"] = image_height_;
    out["width"] = image_width_;
    return out;
  }
  out["kind"] = "files";
  nlohmann::json paths = nlohmann::json::array();
  nlohmann::json labels = nlohmann::json::array();
  for (const FileSample& sample : files_) {
    paths.push_back(sample.path);
    labels.push_back(sample.label);
  }
  out["paths"] = std::move(paths);
  out["labels"] = std::move(labels);
  out["classes"] = classes_;
  return out;
}

Dataset Dataset::from_json(const nlohmann::json& description) {
  Dataset dataset;
  dataset.mode_ = mode_from_name(description.at("mode").get<std::string>());
  if (description.at("kind") == "tar") {
    Dataset tar = from_tar_index(data::TarIndex::from_json(description), dataset.mode_);
    tar.mix_ = mix_from_json(description);
    return tar;
  }
  dataset.mix_ = mix_from_json(description);
  if (description.at("kind") == "idx") {
    dataset.kind_ = Kind::kIdx;
    dataset.idx_images_ = description.at("images").get<std::string>();
    dataset.idx_labels_ = description.at("labels").get<std::string>();
    dataset.idx_count_ = description.at("count").get<int64_t>();
    dataset.image_height_ = description.at("height").get<int>();
    dataset.image_width_ = description.at("width").get<int>();
    return dataset;
  }
  const auto& paths = description.at("paths");
  const auto& labels = description.at("labels");
  dataset.files_.reserve(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    dataset.files_.push_back({paths[i].get<std::string>(), labels[i].get<int64_t>()});
  }
  dataset.classes_ = description.value("classes", std::vector<std::string>{});
  return dataset;
}

}  // namespace ringloader
