// SPDX-License-Identifier: BSD-3-Clause
// Reads one sample's image bytes out of its shard, in a worker.
//
// Local shards: pread at the indexed offset (open files are kept, a bounded
// number). pipe: shards can only be read forward, and the epoch order asks
// for members a little out of archive order (the shuffle buffer), so each
// open shard keeps its command running, and members the stream passes on
// its way to a requested one are kept in a look-back cache until asked for.
// The cache holds at most 2 x shuffle_buffer + 256 members (oldest dropped
// first): the same order of memory as WebDataset's own per-worker shuffle
// buffer. Only a member older than the cache restarts a command (counted).
//
// A sample of a counts-only index (no offset: TarSample::placed() is
// false), or any sample of a streamed view (TarIndex::streamed, named by a
// ShardSample), is the k-th sample of its pipe: shard: the shard's command is
// streamed as whole samples (tar_sample_stream.h), the ones passed on the
// way kept in the same look-back cache, and the label comes from the
// stream's .cls member instead of the table.
//
// With a shard cache (TarIndex::cache), the shards it caches are read from
// their fetched copy instead (pread, like local shards; a streamed view
// reads the copy forward by ordinal); a copy is fetched on first use unless
// the Loader's prefetcher (or, for a streamed view, the indexer) already did.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "loader/data/fetch/shard_cache.h"
#include "loader/data/fetch/shard_input.h"
#include "loader/data/tar/shard_starts.h"
#include "loader/data/tar/tar_index.h"
#include "loader/data/tar/tar_sample_stream.h"

namespace ringloader::data {

class TarMemberReader {
 public:
  // pipe_cache_members < 0: 2 x shuffle_buffer + 256.
  explicit TarMemberReader(const TarIndex& index, int64_t pipe_cache_members = -1);

  // Thread-safe. Reads sample `sample`'s image bytes into `out` and returns
  // its label. Throws IoError naming the shard and member when the bytes
  // are not there any more (shard shrank, command failed), or naming the
  // shard and "stale index" when it no longer holds what its index says.
  int64_t read(int64_t sample, std::vector<uint8_t>& out);

  // pipe: figures: commands started, restarts to go backwards (included in
  // the commands), bytes read from commands (skipped ones included).
  int64_t pipe_commands() const;
  int64_t pipe_restarts() const;
  uint64_t pipe_bytes_streamed() const;
  // The shard cache, or null without one.
  const ShardCache* shard_cache() const { return shard_cache_.get(); }
  // Where each shard's samples start (empty for a streamed view).
  const ShardStarts& starts() const { return starts_; }

 private:
  // (shard, offset), or (shard, ordinal) in a shard a counts-only index
  // lists (a shard is one or the other, so the two never meet).
  using MemberKey = std::pair<int32_t, uint64_t>;
  struct CachedMember {
    std::vector<uint8_t> bytes;
    int64_t label = -1;
  };
  struct PipeShard {
    int32_t shard = 0;
    std::unique_ptr<PipeInput> input;        // members at indexed offsets
    std::unique_ptr<TarSampleStream> samples;  // or whole samples, counted
  };

  TarSample checked_sample(int64_t index) const;
  std::shared_ptr<FileInput> file(int32_t shard);
  std::shared_ptr<FileInput> cached_file(int32_t shard);
  std::shared_ptr<FileInput> cached_file_locked(int32_t shard);  // mutex_ held
  void read_pipe(const TarSample& sample, std::vector<uint8_t>& out);
  int64_t read_unplaced(int64_t index, const TarSample& sample, std::vector<uint8_t>& out);
  // The ordinal-th sample of pipe: shard `shard`, streamed to; its label.
  int64_t read_ordinal(int32_t shard, int64_t ordinal, std::vector<uint8_t>& out);
  void stream_to_ordinal(PipeShard& pipe, int64_t ordinal, GroupedSample& found);
  bool take_cached(const MemberKey& key, std::vector<uint8_t>& out, int64_t* label);
  PipeShard& pipe_shard(int32_t shard);
  void close_stream(PipeShard& pipe);
  void stream_to(PipeShard& pipe, const TarSample& target);
  void reach(PipeInput& input, const TarSample& sample);
  void check_header(const uint8_t* block, const TarSample& sample) const;
  void cache(const MemberKey& key, std::vector<uint8_t> bytes, int64_t label = -1);
  // Buffers are recycled: fresh 50-100 KiB allocations cost a zero fill and
  // page faults that would dominate reading from a pipe.
  std::vector<uint8_t> take_buffer(size_t size);
  void recycle(std::vector<uint8_t>&& buffer);
  [[noreturn]] void fail_short(const TarSample& sample, size_t got) const;

  const TarIndex& index_;
  const size_t pipe_cache_members_;
  ShardStarts starts_;
  mutable std::mutex mutex_;
  // Most-recently-used first; bounded so thousands of shards never exhaust
  // file descriptors (and pipes never pile up).
  std::list<std::pair<int32_t, std::shared_ptr<FileInput>>> files_;
  // Copies in the shard cache: few kept open, so that evicted copies free
  // their space soon.
  std::list<std::pair<int32_t, std::shared_ptr<FileInput>>> cached_;
  std::unique_ptr<ShardCache> shard_cache_;
  // shard -> (when, error) of its last failed fetch.
  std::map<int32_t, std::pair<uint64_t, std::string>> failed_fetches_;
  std::list<PipeShard> pipes_;
  std::map<MemberKey, CachedMember> cache_;
  std::deque<MemberKey> cache_order_;  // insertion order, for dropping
  std::vector<std::vector<uint8_t>> spare_;
  int64_t pipe_commands_ = 0;
  int64_t pipe_restarts_ = 0;
  uint64_t pipe_bytes_closed_ = 0;  // streamed by commands already closed
};

}  // namespace ringloader::data
