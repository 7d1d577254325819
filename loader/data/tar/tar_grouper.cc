// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/tar_grouper.h"

#include <exception>
#include <utility>

#include "loader/data/files/image_folder_scan.h"
#include "loader/data/tar/tar_format.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

int64_t parse_label(const std::string& text, const std::string& shard,
                    const std::string& member) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  size_t end = text.find_last_not_of(" \t\r\n");
  std::string digits = begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
  size_t used = 0;
  int64_t label = 0;
  try {
    label = std::stoll(digits, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (digits.empty() || used != digits.size()) {
    throw IoError("ringloader: shard " + shard + ": member '" + member +
                  "' should hold an integer class label, holds '" +
                  text.substr(0, 40) + "'");
  }
  return label;
}

// "seg.png" is another member of the sample, not its image.
bool is_image_extension(const std::string& extension) {
  return extension.find('.') == std::string::npos && has_image_extension("." + extension);
}

}  // namespace

bool TarSampleGrouper::is_label(const std::string& name) {
  std::string key, extension;
  split_member_name(name, key, extension);
  return extension == "cls";
}

bool TarSampleGrouper::is_label_or_image(const std::string& name) {
  std::string key, extension;
  split_member_name(name, key, extension);
  return extension == "cls" || is_image_extension(extension);
}

bool TarSampleGrouper::add(TarMember&& member, GroupedSample& done) {
  std::string key, extension;
  split_member_name(member.name, key, extension);
  bool finished = false;
  if (key != key_) {
    finished = take(done);
    key_ = std::move(key);
  }
  if (extension == "cls") {
    current_.sample.label = parse_label(member.data, url_, member.name);
  } else if (!has_image_ && is_image_extension(extension)) {
    has_image_ = true;
    current_.sample.offset = member.offset;
    current_.sample.size = member.size;
    current_.sample.image_name = std::move(member.name);
    current_.image = std::move(member.data);
  }
  ++members_;
  return finished;
}

bool TarSampleGrouper::finish(GroupedSample& done) { return take(done); }

bool TarSampleGrouper::take(GroupedSample& done) {
  if (members_ == 0) return false;
  if (!has_image_) {
    throw IoError("ringloader: shard " + url_ + ": sample '" + key_ +
                  "' has no image member (.jpg .jpeg .png .ppm .bmp "
                  ".pgm .tif .tiff .webp)");
  }
  current_.sample.shard = shard_;
  done = std::move(current_);
  current_ = GroupedSample{};
  has_image_ = false;
  members_ = 0;
  return true;
}

}  // namespace ringloader::data
