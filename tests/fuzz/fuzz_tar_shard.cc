// SPDX-License-Identifier: BSD-3-Clause
// A tar shard of arbitrary bytes, read both ways shards are read: the
// indexer's walk (headers and .cls labels, grouped into samples) and a
// worker's stream of whole samples (a counts-only index). Either may refuse
// it with an IoError naming the shard; neither may crash, read out of
// bounds, or hand out image bytes the shard never held.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "loader/data/fetch/shard_input.h"
#include "loader/data/tar/tar_grouper.h"
#include "loader/data/tar/tar_sample_stream.h"
#include "loader/data/tar/tar_walk.h"
#include "ringloader/errors.h"

namespace {

using ringloader::data::ShardInput;

// The fuzzer's bytes as a forward-only shard, as a pipe: command's stdout.
class BytesInput final : public ShardInput {
 public:
  BytesInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t read(uint8_t* out, size_t n) override {
    const size_t got = static_cast<size_t>(std::min<uint64_t>(n, size_ - position_));
    if (got > 0) std::memcpy(out, data_ + position_, got);
    position_ += got;
    return got;
  }
  uint64_t skip(uint64_t n) override {
    const uint64_t moved = std::min<uint64_t>(n, size_ - position_);
    position_ += moved;
    return moved;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

void walk_as_the_indexer(const uint8_t* data, size_t size) {
  using namespace ringloader::data;
  BytesInput input(data, size);
  TarSampleGrouper grouper("fuzz.tar", 0);
  GroupedSample done;
  walk_tar(input, "fuzz.tar", TarSampleGrouper::is_label, [&](TarMember&& member) {
    if (member.offset + member.size < member.offset) __builtin_trap();
    grouper.add(std::move(member), done);
  });
  grouper.finish(done);
}

void stream_as_a_worker(const uint8_t* data, size_t size) {
  using namespace ringloader::data;
  TarSampleStream stream(std::make_unique<BytesInput>(data, size), "fuzz.tar", 0);
  GroupedSample sample;
  int64_t count = 0;
  while (stream.next(sample)) {
    if (sample.image.size() > size || stream.next_ordinal() != ++count) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    walk_as_the_indexer(data, size);
  } catch (const ringloader::IoError&) {
  }
  try {
    stream_as_a_worker(data, size);
  } catch (const ringloader::IoError&) {
  }
  return 0;
}
