// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/tar_member_reader.h"

#include <algorithm>

#include "loader/data/tar/tar_format.h"
#include "loader/ring/futex.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr size_t kOpenFiles = 64;
constexpr size_t kOpenPipes = 8;
constexpr size_t kOpenCached = 4;

// A cached copy read forward, as a streamed view reads its samples (by
// ordinal): the handle it shares keeps the copy locked against eviction.
class CopyStream final : public ShardInput {
 public:
  explicit CopyStream(std::shared_ptr<FileInput> file) : file_(std::move(file)) {}
  size_t read(uint8_t* out, size_t n) override {
    const size_t got = file_->read_at(position_, out, n);
    position_ += got;
    return got;
  }
  uint64_t skip(uint64_t n) override {
    const uint64_t step = std::min<uint64_t>(n, file_->size() - std::min(position_, file_->size()));
    position_ += step;
    return step;
  }

 private:
  std::shared_ptr<FileInput> file_;
};

}  // namespace

TarMemberReader::TarMemberReader(const TarIndex& index, int64_t pipe_cache_members)
    : index_(index),
      pipe_cache_members_(static_cast<size_t>(
          pipe_cache_members >= 0 ? pipe_cache_members : 2 * index.shuffle_buffer + 256)),
      starts_(index.shard_sizes) {
  if (index.cache.enabled()) shard_cache_ = std::make_unique<ShardCache>(index.cache);
}

int64_t TarMemberReader::read(int64_t index, std::vector<uint8_t>& out) {
  if (index_.streamed) {
    // SampleSource checked the name; a direct caller gets the same check.
    if (!is_shard_sample(index, static_cast<int64_t>(index_.shards.size()))) {
      throw IoError("ringloader: sample " + std::to_string(index) +
                    " names no sample of these shards");
    }
    const ShardSample named = shard_sample_of(index);
    return read_ordinal(static_cast<int32_t>(named.shard), named.ordinal, out);
  }
  const TarSample sample = checked_sample(index);
  const std::string& url = index_.shards[sample.shard];
  if (sample.placed()) check_member_size(sample.size, url, sample.image_name);
  const bool cached = shard_cache_ && shard_cache_->caches(url);
  if (!sample.placed()) {
    // load_tar_manifest lets counts-only shards be pipe: ones, uncached;
    // a table that says otherwise was not written by it.
    if (cached || !is_pipe_url(url)) {
      throw IoError("ringloader: tar sample table " + index_.table->proc_path() + ": sample " +
                    std::to_string(index) + " has no offset in " + url +
                    ", which is not an uncached pipe: shard (a corrupt table)");
    }
    return read_unplaced(index, sample, out);
  }
  if (!cached && is_pipe_url(url)) {
    read_pipe(sample, out);
    return sample.label;
  }
  std::shared_ptr<FileInput> input = cached ? cached_file(sample.shard) : file(sample.shard);
  out.resize(static_cast<size_t>(sample.size));
  size_t got = input->read_at(sample.offset, out.data(), out.size());
  if (got < out.size()) fail_short(sample, got);
  return sample.label;
}

// The table checks its own bounds; a sample must also lie in the range
// of samples its shard owns by the shard sizes, since stream_to walks that
// range to pass the members in front of it.
TarSample TarMemberReader::checked_sample(int64_t index) const {
  TarSample sample = index_.sample(index);
  const size_t shard = static_cast<size_t>(sample.shard);
  if (shard >= starts_.shards() || index < starts_.first(shard) || index >= starts_.end(shard)) {
    throw IoError("ringloader: tar sample table " + index_.table->proc_path() + ": sample " +
                  std::to_string(index) + " names shard " + std::to_string(shard) +
                  ", outside that shard's samples (a corrupt table)");
  }
  return sample;
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

std::shared_ptr<FileInput> TarMemberReader::cached_file(int32_t shard) {
  // Fetching (or waiting for another process's fetch) under the lock keeps
  // this process's threads from fetching one shard twice.
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_file_locked(shard);
}

std::shared_ptr<FileInput> TarMemberReader::cached_file_locked(int32_t shard) {
  for (auto it = cached_.begin(); it != cached_.end(); ++it) {
    if (it->first == shard) {
      cached_.splice(cached_.begin(), cached_, it);
      return it->second;
    }
  }
  // A fetch that just failed (after its retries) fails the other samples
  // of the shard at once, instead of retrying once per sample.
  constexpr uint64_t kRememberFailureNs = 5'000'000'000;
  auto failed = failed_fetches_.find(shard);
  if (failed != failed_fetches_.end()) {
    if (ring::monotonic_ns() - failed->second.first < kRememberFailureNs) {
      throw IoError(failed->second.second);
    }
    failed_fetches_.erase(failed);
  }
  std::shared_ptr<FileInput> input;
  try {
    input = shard_cache_->open(index_.shards[shard],
                         index_.shard_bytes.empty() ? 0 : index_.shard_bytes[shard]);
  } catch (const IoError& error) {
    failed_fetches_[shard] = {ring::monotonic_ns(), error.what()};
    throw;
  }
  cached_.emplace_front(shard, input);
  if (cached_.size() > kOpenCached) cached_.pop_back();
  return input;
}

TarMemberReader::PipeShard& TarMemberReader::pipe_shard(int32_t shard) {
  for (auto it = pipes_.begin(); it != pipes_.end(); ++it) {
    if (it->shard == shard) {
      pipes_.splice(pipes_.begin(), pipes_, it);
      return pipes_.front();
    }
  }
  if (pipes_.size() >= kOpenPipes) {
    close_stream(pipes_.back());
    pipes_.pop_back();
  }
  pipes_.push_front(PipeShard{shard, nullptr, nullptr});
  return pipes_.front();
}

void TarMemberReader::close_stream(PipeShard& pipe) {
  if (pipe.input) pipe_bytes_closed_ += pipe.input->position();
  if (pipe.samples) pipe_bytes_closed_ += pipe.samples->position();
  pipe.input.reset();
  pipe.samples.reset();
}

bool TarMemberReader::take_cached(const MemberKey& key, std::vector<uint8_t>& out,
                                  int64_t* label) {
  auto cached = cache_.find(key);
  if (cached == cache_.end()) return false;
  out.swap(cached->second.bytes);
  if (label) *label = cached->second.label;
  recycle(std::move(cached->second.bytes));
  cache_.erase(cached);
  return true;
}

void TarMemberReader::read_pipe(const TarSample& sample, std::vector<uint8_t>& out) {
  // One stream per shard: readers of the same shard take turns.
  std::lock_guard<std::mutex> lock(mutex_);
  if (take_cached({sample.shard, sample.offset}, out, nullptr)) return;
  PipeShard& pipe = pipe_shard(sample.shard);
  if (pipe.input && pipe.input->position() > sample.offset) {
    close_stream(pipe);
    ++pipe_restarts_;
  }
  try {
    if (!pipe.input) {
      pipe.input = std::make_unique<PipeInput>(index_.shards[sample.shard]);
      ++pipe_commands_;
    }
    stream_to(pipe, sample);
    out.resize(static_cast<size_t>(sample.size));
    size_t got = pipe.input->read(out.data(), out.size());
    if (got < out.size()) fail_short(sample, got);
  } catch (const IoError& error) {
    close_stream(pipe);
    std::string text = error.what();
    if (text.find(sample.image_name) != std::string::npos) throw;
    throw IoError(text + " (reading member '" + sample.image_name + "')");
  }
}

// Moves the stream to `target`, caching the members it passes on the way.
void TarMemberReader::stream_to(PipeShard& pipe, const TarSample& target) {
  PipeInput& input = *pipe.input;
  // The first sample of the shard at or after the stream's position.
  int64_t next = starts_.first(static_cast<size_t>(target.shard));
  int64_t end = starts_.end(static_cast<size_t>(target.shard));
  for (int64_t count = end - next; count > 0;) {
    const int64_t half = count / 2;
    if (index_.table->offset(next + half) < input.position()) {
      next += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  for (; next != end && index_.table->offset(next) < target.offset; ++next) {
    const TarSample passed = checked_sample(next);
    reach(input, passed);
    std::vector<uint8_t> bytes = take_buffer(static_cast<size_t>(passed.size));
    size_t got = input.read(bytes.data(), bytes.size());
    if (got < bytes.size()) fail_short(passed, got);
    cache({passed.shard, passed.offset}, std::move(bytes));
  }
  reach(input, target);
}

// A counts-only index numbers a shard's samples without placing them: the
// shard is streamed as whole samples to the one asked for.
int64_t TarMemberReader::read_unplaced(int64_t index, const TarSample& sample,
                                       std::vector<uint8_t>& out) {
  // checked_sample put `index` among its shard's samples.
  return read_ordinal(sample.shard, index - starts_.first(static_cast<size_t>(sample.shard)),
                      out);
}

int64_t TarMemberReader::read_ordinal(int32_t shard, int64_t ordinal, std::vector<uint8_t>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t label = -1;
  if (take_cached({shard, static_cast<uint64_t>(ordinal)}, out, &label)) return label;
  PipeShard& pipe = pipe_shard(shard);
  const std::string& url = index_.shards[shard];
  // A cached copy (the private cache of a streamed view) is read from its
  // start again at the cost of a local read, not of a command.
  const bool copy = shard_cache_ && shard_cache_->caches(url);
  if (pipe.samples && pipe.samples->next_ordinal() > ordinal) {
    close_stream(pipe);
    if (!copy) ++pipe_restarts_;
  }
  try {
    if (!pipe.samples) {
      std::unique_ptr<ShardInput> input;
      if (copy) {
        input = std::make_unique<CopyStream>(cached_file_locked(shard));
      } else {
        input = std::make_unique<PipeInput>(url);
        ++pipe_commands_;
      }
      pipe.samples = std::make_unique<TarSampleStream>(std::move(input), url, shard);
    }
    GroupedSample found;
    stream_to_ordinal(pipe, ordinal, found);
    out.assign(found.image.begin(), found.image.end());
    return found.sample.label;
  } catch (const IoError&) {
    close_stream(pipe);
    throw;
  }
}

// Caches the samples passed on the way. The index's count is checked as
// the stream passes it: a shard with fewer samples, or with more after its
// last counted one, is not the shard that was counted.
void TarMemberReader::stream_to_ordinal(PipeShard& pipe, int64_t ordinal, GroupedSample& found) {
  TarSampleStream& stream = *pipe.samples;
  const int32_t shard = pipe.shard;
  // A streamed view has no count: the trainer counted the shard, and a
  // shard that now ends sooner is the only mismatch a worker can see.
  const int64_t counted = index_.streamed ? -1 : index_.shard_sizes[static_cast<size_t>(shard)];
  for (;;) {
    const int64_t at = stream.next_ordinal();
    const bool got = stream.next(found);
    if (!got && counted < 0) {
      throw IoError("ringloader: shard " + index_.shards[shard] + " ends after " +
                    std::to_string(at) + " samples, sample " + std::to_string(ordinal) +
                    " was asked for: it changed since it was indexed");
    }
    if (!got || (at == counted - 1 && !stream.at_end())) {
      throw IoError("ringloader: shard " + index_.shards[shard] + ": stale index" +
                    (index_.manifest.empty() ? std::string() : " " + index_.manifest) +
                    ": it counts " + std::to_string(counted) + " samples, the shard holds " +
                    (got ? "more" : std::to_string(at)) + "; write the index again");
    }
    if (at == ordinal) return;
    std::vector<uint8_t> bytes = take_buffer(found.image.size());
    std::copy(found.image.begin(), found.image.end(), bytes.begin());
    cache({shard, static_cast<uint64_t>(at)}, std::move(bytes), found.sample.label);
  }
}

// Streams up to `sample`'s data, checking the member header in front of it:
// a shard that changed since it was indexed (a stale shard index, an object
// rewritten in place) must fail, not hand another member's bytes out.
void TarMemberReader::reach(PipeInput& input, const TarSample& sample) {
  uint64_t gap = sample.offset - input.position();
  if (gap >= kTarBlock) {
    if (input.skip(gap - kTarBlock) < gap - kTarBlock) fail_short(sample, 0);
    uint8_t block[kTarBlock];
    if (input.read(block, kTarBlock) < kTarBlock) fail_short(sample, 0);
    check_header(block, sample);
    gap = 0;
  }
  if (input.skip(gap) < gap) fail_short(sample, 0);
}

void TarMemberReader::check_header(const uint8_t* block, const TarSample& sample) const {
  const std::string& url = index_.shards[sample.shard];
  TarHeader header;
  std::string found;
  try {
    if (parse_tar_header(block, url, header) == TarBlockKind::kZero) {
      found = "the end of the archive";
    }
  } catch (const IoError&) {
    found = "no valid member header";
  }
  // A name past 100 bytes, or not ASCII, lives in a GNU long-name or pax
  // member before this header, which holds a truncated or replaced one:
  // only the size can tell.
  bool name_fits = sample.image_name.size() <= 100;
  for (char c : sample.image_name) name_fits = name_fits && static_cast<unsigned char>(c) < 0x80;
  if (found.empty() && header.type == TarEntryType::kFile && header.size == sample.size &&
      (!name_fits || header.name == sample.image_name)) {
    return;
  }
  if (found.empty()) {
    found = "member '" + header.name + "' (" + std::to_string(header.size) + " bytes)";
  }
  throw IoError("ringloader: shard " + url + ": stale index" +
                (index_.manifest.empty() ? std::string() : " " + index_.manifest) +
                ": member '" + sample.image_name + "' (" + std::to_string(sample.size) +
                " bytes) was indexed at offset " + std::to_string(sample.offset) +
                ", the shard holds " + found + " there");
}

void TarMemberReader::cache(const MemberKey& key, std::vector<uint8_t> bytes, int64_t label) {
  if (pipe_cache_members_ == 0) {
    recycle(std::move(bytes));
    return;
  }
  cache_[key] = CachedMember{std::move(bytes), label};
  cache_order_.push_back(key);
  // Entries already taken leave stale keys behind; erase() skips them.
  while (cache_.size() > pipe_cache_members_ && !cache_order_.empty()) {
    auto oldest = cache_.find(cache_order_.front());
    if (oldest != cache_.end()) {
      recycle(std::move(oldest->second.bytes));
      cache_.erase(oldest);
    }
    cache_order_.pop_front();
  }
  if (cache_order_.size() > 4 * pipe_cache_members_ + 1024) {
    std::deque<MemberKey> live;
    for (const MemberKey& k : cache_order_) {
      if (cache_.count(k)) live.push_back(k);
    }
    cache_order_.swap(live);
  }
}

std::vector<uint8_t> TarMemberReader::take_buffer(size_t size) {
  std::vector<uint8_t> buffer;
  if (!spare_.empty()) {
    buffer.swap(spare_.back());
    spare_.pop_back();
  }
  buffer.resize(size);  // zero-fills only beyond the recycled size
  return buffer;
}

void TarMemberReader::recycle(std::vector<uint8_t>&& buffer) {
  constexpr size_t kSpareBuffers = 64;
  if (spare_.size() < kSpareBuffers && buffer.capacity() > 0) {
    spare_.push_back(std::move(buffer));
  }
}

void TarMemberReader::fail_short(const TarSample& sample, size_t got) const {
  throw IoError("ringloader: shard " + index_.shards[sample.shard] +
                " is truncated in member '" + sample.image_name + "' (read " +
                std::to_string(got) + " of " + std::to_string(sample.size) +
                " bytes at offset " + std::to_string(sample.offset) + ")");
}

int64_t TarMemberReader::pipe_commands() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pipe_commands_;
}

int64_t TarMemberReader::pipe_restarts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pipe_restarts_;
}

uint64_t TarMemberReader::pipe_bytes_streamed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t total = pipe_bytes_closed_;
  for (const PipeShard& pipe : pipes_) {
    total += pipe.input ? pipe.input->position() : 0;
    total += pipe.samples ? pipe.samples->position() : 0;
  }
  return total;
}

}  // namespace ringloader::data
