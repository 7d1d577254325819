// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/tar_sample_stream.h"

#include <utility>

namespace ringloader::data {

TarSampleStream::TarSampleStream(std::unique_ptr<ShardInput> input, const std::string& url,
                                 int32_t shard)
    : input_(std::move(input)), cursor_(*input_, url), grouper_(url, shard) {}

bool TarSampleStream::next(GroupedSample& out) {
  TarMember member;
  while (cursor_.next(member, TarSampleGrouper::is_label_or_image)) {
    if (grouper_.add(std::move(member), out)) {
      ++next_ordinal_;
      return true;
    }
  }
  if (!grouper_.finish(out)) return false;
  at_end_ = true;
  ++next_ordinal_;
  return true;
}

}  // namespace ringloader::data
