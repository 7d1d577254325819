// SPDX-License-Identifier: BSD-3-Clause
// Dataset descriptions: resolved once in the trainer, shipped to workers as
// JSON so every process agrees on the samples and their order.
#include "ringloader/dataset.h"

#include "loader/data/files/idx_file.h"
#include "loader/data/tables/sample_table.h"
#include "loader/data/tar/tar_index.h"
#include "loader/data/tables/tensor_rows.h"
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

// A worker's copy: the trainer's memfd, checked against what the
// description says (a different file behind the path is refused).
Dataset rows_from_json(const nlohmann::json& description) {
  const auto path = description.at("rows").get<std::string>();
  Dataset dataset = Dataset::tensor_rows(path);
  const auto rows = dataset.tensor_rows();
  if (rows->size() != description.at("count").get<int64_t>() ||
      rows->row_bytes() != description.at("row_bytes").get<uint64_t>() ||
      rows->digest() != description.at("digest").get<std::string>()) {
    throw IoError("ringloader: tensor rows " + path + " hold " + std::to_string(rows->size()) +
                  " rows of " + std::to_string(rows->row_bytes()) +
                  " bytes (digest " + rows->digest() + "), not what its description says");
  }
  return dataset;
}

}  // namespace

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
  if (kind_ == Kind::kTar) return tar().size();
  if (kind_ == Kind::kRows) return rows_->size();
  return kind_ == Kind::kIdx ? idx_count_ : table_->size();
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
    out.update(tar().to_json());
    out["kind"] = "tar";
    out["mode"] = mode_name(mode_);
    return out;
  }
  out["mode"] = mode_name(mode_);
  if (kind_ == Kind::kRows) {
    out["kind"] = "rows";
    out["rows"] = rows_->proc_path();
    out["count"] = rows_->size();
    out["row_bytes"] = rows_->row_bytes();
    out["digest"] = rows_->digest();
    return out;
  }
  if (kind_ == Kind::kIdx) {
    out["kind"] = "idx";
    out["images"] = idx_images_;
    out["labels"] = idx_labels_;
    out["count"] = idx_count_;
    out["height"] = image_height_;
    out["width"] = image_width_;
    return out;
  }
  files_json(out);
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
  if (description.at("kind") == "rows") return rows_from_json(description);
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
  dataset.files_from_json(description);
  return dataset;
}

}  // namespace ringloader
