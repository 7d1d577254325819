// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/sample_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loader/ring/futex.h"
#include "ringloader/errors.h"

namespace ringloader::data {

void read_file(const std::string& path, std::vector<uint8_t>& out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw IoError("cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    throw IoError(path + " is not a regular file");
  }
  out.resize(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      close(fd);
      throw IoError("cannot read " + path + ": " + std::strerror(error));
    }
    if (n == 0) break;  // shrank while we read
    done += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(done);
}

SampleSource::SampleSource(Dataset dataset, transforms::DecodeLimits limits)
    : dataset_(std::move(dataset)), limits_(limits) {
  if (!dataset_.idx_images_path().empty()) {
    idx_images_ = read_idx(dataset_.idx_images_path());
    idx_labels_ = read_idx(dataset_.idx_labels_path());
  }
  if (dataset_.tar_index()) {
    tar_reader_ = std::make_unique<TarMemberReader>(*dataset_.tar_index());
    streamed_ = dataset_.tar_index()->streamed;
  }
}

uint64_t SampleSource::random_key(int64_t index) const {
  // A streamed view's samples are ShardSamples already.
  if (!tar_reader_ || streamed_ || index < 0 || index >= tar_reader_->starts().total()) {
    return static_cast<uint64_t>(index);
  }
  return static_cast<uint64_t>(tar_reader_->starts().shard_sample(index));
}

int64_t SampleSource::shard_fetches() const {
  const ShardCache* cache = tar_reader_ ? tar_reader_->shard_cache() : nullptr;
  return cache ? cache->fetches() : 0;
}

uint64_t SampleSource::shard_bytes_fetched() const {
  const ShardCache* cache = tar_reader_ ? tar_reader_->shard_cache() : nullptr;
  return cache ? cache->bytes_fetched() : 0;
}

bool SampleSource::in_range(int64_t index) const {
  if (!streamed_) return index >= 0 && index < size();
  // A streamed view numbers nothing: every sample is named by its shard.
  return is_shard_sample(index, static_cast<int64_t>(dataset_.tar_index()->shards.size()));
}

std::string SampleSource::describe(int64_t index) const {
  if (streamed_ && in_range(index)) {
    const ShardSample sample = shard_sample_of(index);
    return "sample " + std::to_string(sample.ordinal) + " of shard " +
           dataset_.tar_index()->shards[static_cast<size_t>(sample.shard)];
  }
  if (!in_range(index)) {
    return "sample " + std::to_string(index) + " (out of range)";
  }
  if (!dataset_.idx_images_path().empty()) {
    return describe_sample(index, dataset_.idx_images_path());
  }
  if (copies_rows()) return "sample " + std::to_string(index) + " (tensor rows)";
  if (dataset_.tar_index()) {
    try {
      return describe_tar_sample(*dataset_.tar_index(), index);
    } catch (const IoError& error) {
      return "sample " + std::to_string(index) + " (" + error.what() + ")";
    }
  }
  try {
    return describe_sample(index, dataset_.sample_path(index));
  } catch (const IoError& error) {
    return "sample " + std::to_string(index) + " (" + error.what() + ")";
  }
}

int64_t SampleSource::load(int64_t index, transforms::Image& image,
                           std::vector<uint8_t>& file_bytes,
                           SampleTiming& timing,
                           const transforms::RegionPlanner& region) const {
  if (!in_range(index)) {
    throw Error("ringloader: sample index " + std::to_string(index) +
                (streamed_ ? std::string(" names no sample of a shard being indexed")
                           : " is outside the dataset of " + std::to_string(size())));
  }
  if (!idx_images_.values.empty()) return load_idx(index, image);
  return load_encoded(index, image, file_bytes, timing, region);
}

int64_t SampleSource::copy_row(int64_t index, uint8_t* destination) const {
  return dataset_.tensor_rows()->copy_row(index, destination);
}

int64_t SampleSource::read_encoded(int64_t index,
                                   std::vector<uint8_t>& file_bytes) const {
  if (tar_reader_) {
    // The table's label, or the shard's own for a counts-only index.
    return tar_reader_->read(index, file_bytes);
  }
  // Both checked against the table's bounds (it is the trainer's memory).
  read_file(dataset_.sample_path(index), file_bytes);
  return dataset_.sample_label(index);
}

int64_t SampleSource::load_encoded(int64_t index, transforms::Image& image,
                                   std::vector<uint8_t>& file_bytes,
                                   SampleTiming& timing,
                                   const transforms::RegionPlanner& region) const {
  uint64_t start = ring::monotonic_ns();
  int64_t label = 0;
  try {
    label = read_encoded(index, file_bytes);
  } catch (const IoError& error) {
    throw IoError("ringloader: " + describe(index) + ": " + error.what());
  }
  uint64_t read_done = ring::monotonic_ns();
  timing.read_ns += read_done - start;
  // decode_image names `source` and the reason; we add the sample index.
  transforms::decode_image(file_bytes.data(), file_bytes.size(),
                           dataset_.color_mode(), describe(index), image,
                           limits_, region);
  timing.decode_ns += ring::monotonic_ns() - read_done;
  return label;
}

int64_t SampleSource::load_idx(int64_t index, transforms::Image& image) const {
  const int height = dataset_.image_height();
  const int width = dataset_.image_width();
  const int channels = dataset_.color_mode() == ColorMode::kRGB ? 3 : 1;
  image.reshape(height, width, channels);
  size_t bytes = static_cast<size_t>(height) * width * channels;
  std::memcpy(image.pixels.data(), idx_images_.values.data() + index * bytes,
              bytes);
  return idx_labels_.values[index];
}

}  // namespace ringloader::data
