// SPDX-License-Identifier: BSD-3-Clause
// File-backed datasets (image_folder, file_list, their selections and
// mixes): every one is a sample table (loader/data/tables/sample_table.h) that the
// trainer builds once; its description names the table's memfd, so the
// JSON that reaches a worker is a few hundred bytes at any dataset size.
#include <fstream>

#include "loader/data/files/image_folder_scan.h"
#include "loader/data/tables/sample_table.h"
#include "loader/data/tar/tar_index.h"
#include "ringloader/dataset.h"
#include "ringloader/errors.h"

namespace ringloader {
namespace {

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

void copy_classes(const data::SampleTable& table, data::SampleTableBuilder& builder) {
  for (const std::string& name : table.classes()) builder.add_class(name);
}

}  // namespace

Dataset Dataset::from_table(std::shared_ptr<const data::SampleTable> table, ColorMode mode) {
  if (table->size() == 0) throw IoError("ringloader: the file list is empty");
  Dataset dataset;
  dataset.kind_ = Kind::kFiles;
  dataset.mode_ = mode;
  dataset.classes_ = table->classes();
  dataset.table_ = std::move(table);
  return dataset;
}

Dataset Dataset::image_folder(const std::string& root, ColorMode mode) {
  return from_table(data::scan_image_folder_table(root), mode);
}

Dataset Dataset::image_folder(const std::string& root, ColorMode mode,
                              const std::vector<std::string>& extensions, bool all_files) {
  data::FolderScanOptions options;
  options.extensions = extensions;
  options.all_files = all_files;
  return from_table(data::scan_image_folder_table(root, options), mode);
}

Dataset Dataset::file_list(std::vector<FileSample> samples, ColorMode mode) {
  if (samples.empty()) throw IoError("ringloader: the file list is empty");
  data::SampleTableBuilder builder;
  for (const FileSample& sample : samples) builder.add_path(sample.path, sample.label);
  samples = {};
  return from_table(data::SampleTable::build(std::move(builder)), mode);
}

Dataset Dataset::file_list(const std::string& list_path, ColorMode mode) {
  std::ifstream input(list_path);
  if (!input) throw IoError("ringloader: cannot read file list " + list_path);
  data::SampleTableBuilder builder;
  std::string line;
  size_t line_number = 0;
  std::string base = folder_of(list_path);
  while (std::getline(input, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line[line.find_first_not_of(" \t")] == '#') continue;
    FileSample sample = parse_list_line(line, base, list_path, line_number);
    builder.add_path(sample.path, sample.label);
  }
  if (builder.size() == 0) {
    throw IoError("ringloader: file list " + list_path + " lists no sample");
  }
  return from_table(data::SampleTable::build(std::move(builder)), mode);
}

std::string Dataset::sample_path(int64_t index) const {
  if (!table_) throw OptionError("ringloader: sample_path needs a file-backed dataset");
  return table_->path(index);
}

int64_t Dataset::sample_label(int64_t index) const {
  if (kind_ == Kind::kTar) {
    tar().require_placed("sample_label");
    return tar().table->label(index);
  }
  if (!table_) {
    throw OptionError("ringloader: sample_label needs a file-backed or tar dataset");
  }
  return table_->label(index);
}

const int64_t* Dataset::sample_labels() const {
  if (kind_ == Kind::kTar) {
    tar().require_placed("the labels of its samples (targets)");
    return tar().table->labels();
  }
  return table_ ? table_->labels() : nullptr;
}

uint64_t Dataset::sample_table_bytes() const {
  if (kind_ == Kind::kTar) return tar().table ? tar().table->bytes() : 0;
  return table_ ? table_->bytes() : 0;
}

std::vector<FileSample> Dataset::files() const {
  std::vector<FileSample> out;
  if (!table_) return out;
  out.reserve(static_cast<size_t>(table_->size()));
  for (int64_t i = 0; i < table_->size(); ++i) out.push_back({table_->path(i), table_->label(i)});
  return out;
}

Dataset Dataset::select(const std::vector<int64_t>& indices) const {
  if (!table_ || !mix_.empty()) {
    throw OptionError("ringloader: select() needs a file-backed dataset that is not a mix");
  }
  data::SampleTableBuilder builder;
  copy_classes(*table_, builder);
  for (int64_t index : indices) {
    if (index < 0 || index >= table_->size()) {
      throw OptionError("ringloader: select: index " + std::to_string(index) +
                        " is outside the dataset of " + std::to_string(table_->size()));
    }
    builder.add_path(table_->path(index), table_->label(index));
  }
  return from_table(data::SampleTable::build(std::move(builder)), mode_);
}

Dataset Dataset::concat_files(const std::vector<std::pair<Dataset, double>>& parts) {
  data::SampleTableBuilder builder;
  copy_classes(*parts.front().first.table_, builder);
  for (const auto& [part, weight] : parts) {
    const data::SampleTable& table = *part.table_;
    for (int64_t i = 0; i < table.size(); ++i) builder.add_path(table.path(i), table.label(i));
  }
  return from_table(data::SampleTable::build(std::move(builder)), parts.front().first.mode_);
}

void Dataset::files_json(nlohmann::json& out) const {
  out["kind"] = "files";
  out["table"] = table_->proc_path();
  out["digest"] = table_->digest();
  out["count"] = table_->size();
}

void Dataset::files_from_json(const nlohmann::json& description) {
  kind_ = Kind::kFiles;
  if (description.contains("table")) {
    table_ = data::SampleTable::open(description.at("table").get<std::string>());
    const auto count = description.at("count").get<int64_t>();
    if (table_->size() != count) {
      throw IoError("ringloader: sample table " + description.at("table").get<std::string>() +
                    " holds " + std::to_string(table_->size()) + " samples, its description " +
                    std::to_string(count));
    }
    classes_ = table_->classes();
    return;
  }
  // A description with the lists themselves (a Python dataset converted
  // in the trainer): the table is built here, once.
  const auto& paths = description.at("paths");
  const auto& labels = description.at("labels");
  if (paths.size() != labels.size()) {
    throw OptionError("ringloader: a file description has " + std::to_string(paths.size()) +
                      " paths and " + std::to_string(labels.size()) + " labels");
  }
  data::SampleTableBuilder builder;
  for (const auto& name : description.value("classes", std::vector<std::string>{})) {
    builder.add_class(name);
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    builder.add_path(paths[i].get_ref<const std::string&>(), labels[i].get<int64_t>());
  }
  std::vector<MixPart> mix = std::move(mix_);
  *this = from_table(data::SampleTable::build(std::move(builder)), mode_);
  mix_ = std::move(mix);
}

}  // namespace ringloader
