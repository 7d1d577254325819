#include "loader/data/tar_member_reader.h"

#include <algorithm>

#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr size_t kOpenFiles = 64;
constexpr size_t kOpenPipes = 4;

}  // namespace

void TarMemberReader::read(int64_t index, std::vector<uint8_t>& out) {
  const TarSample& sample = index_.samples[static_cast<size_t>(index)];
  if (is_pipe_url(index_.shards[sample.shard])) {
    read_pipe(sample, out);
    return;
  }
  std::shared_ptr<FileInput> input = file(sample.shard);
  out.resize(static_cast<size_t>(sample.size));
  size_t got = input->read_at(sample.offset, out.data(), out.size());
  if (got < out.size()) fail_short(sample, got);
}

std::shared_ptr<FileInput> TarMemberReader::file(int32_t shard) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = files_.begin(); it != files_.end(); ++it) {
    if (it->first == shard) {
      files_.splice(files_.begin(), files_, it);
      return it->second;
    }
  }
  // Readers of an evicted file keep it open through their shared_ptr.
  auto input = std::make_shared<FileInput>(index_.shards[shard]);
  files_.emplace_front(shard, input);
  if (files_.size() > kOpenFiles) files_.pop_back();
  return input;
}

void TarMemberReader::read_pipe(const TarSample& sample,
                                std::vector<uint8_t>& out) {
  // One stream per shard: readers of the same shard take turns.
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<PipeInput>& stream = pipes_[sample.shard];
  if (stream && stream->position() > sample.offset) {
    stream.reset();
    ++pipe_restarts_;
  }
  if (!stream) {
    stream = std::make_unique<PipeInput>(index_.shards[sample.shard]);
    pipe_order_.erase(std::remove(pipe_order_.begin(), pipe_order_.end(), sample.shard),
                      pipe_order_.end());
    pipe_order_.push_back(sample.shard);
    if (pipe_order_.size() > kOpenPipes) {
      pipes_.erase(pipe_order_.front());
      pipe_order_.erase(pipe_order_.begin());
    }
  }
  PipeInput& input = *pipes_[sample.shard];
  const uint64_t gap = sample.offset - input.position();
  out.resize(static_cast<size_t>(sample.size));
  size_t got = 0;
  try {
    got = input.skip(gap) < gap ? 0 : input.read(out.data(), out.size());
  } catch (const IoError& error) {
    pipes_.erase(sample.shard);
    throw IoError(std::string(error.what()) + " (reading member '" +
                  sample.image_name + "')");
  }
  if (got < out.size()) {
    pipes_.erase(sample.shard);
    fail_short(sample, got);
  }
}

void TarMemberReader::fail_short(const TarSample& sample, size_t got) const {
  throw IoError("ringloader: shard " + index_.shards[sample.shard] +
                " is truncated in member '" + sample.image_name + "' (read " +
                std::to_string(got) + " of " + std::to_string(sample.size) +
                " bytes at offset " + std::to_string(sample.offset) + ")");
}

int64_t TarMemberReader::pipe_restarts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pipe_restarts_;
}

}  // namespace ringloader::data
