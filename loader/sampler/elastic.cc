// SPDX-License-Identifier: BSD-3-Clause
#include "loader/sampler/elastic.h"

#include <algorithm>
#include <string>

#include "ringloader/errors.h"

namespace ringloader::sampler {

std::vector<int64_t> rank_share(int64_t count, int64_t rank, int64_t world,
                                ShareLayout layout, int64_t batch_size,
                                bool drop_last) {
  std::vector<int64_t> out;
  if (count <= 0) return out;
  const int64_t per_rank = (count + world - 1) / world;
  const int64_t padded = per_rank * world;
  out.reserve(static_cast<size_t>(per_rank));
  if (layout == ShareLayout::kContiguous) {
    for (int64_t i = rank * per_rank; i < (rank + 1) * per_rank; ++i) {
      out.push_back(i % count);
    }
  } else {
    for (int64_t i = rank; i < padded; i += world) out.push_back(i % count);
  }
  if (drop_last) out.resize(static_cast<size_t>(per_rank / batch_size * batch_size));
  return out;
}

std::vector<int64_t> remaining_positions(int64_t length,
                                         const std::vector<ElasticStage>& stages,
                                         ShareLayout layout, int64_t batch_size,
                                         bool drop_last) {
  std::vector<int64_t> left(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i) left[static_cast<size_t>(i)] = i;
  std::vector<char> consumed;
  for (size_t s = 0; s < stages.size(); ++s) {
    const ElasticStage& stage = stages[s];
    if (stage.world_size <= 0 ||
        static_cast<int64_t>(stage.batches.size()) != stage.world_size) {
      throw OptionError("ringloader: elastic stage " + std::to_string(s) +
                        " lists " + std::to_string(stage.batches.size()) +
                        " ranks' batch counts for world size " +
                        std::to_string(stage.world_size));
    }
    const auto count = static_cast<int64_t>(left.size());
    consumed.assign(left.size(), 0);
    for (int64_t rank = 0; rank < stage.world_size; ++rank) {
      const std::vector<int64_t> share =
          rank_share(count, rank, stage.world_size, layout, batch_size, drop_last);
      const int64_t batches = stage.batches[static_cast<size_t>(rank)];
      const int64_t taken = batches * batch_size;
      if (batches < 0 || taken > static_cast<int64_t>(share.size()) + batch_size - 1) {
        throw OptionError("ringloader: elastic stage " + std::to_string(s) +
                          ": rank " + std::to_string(rank) + " of " +
                          std::to_string(stage.world_size) + " cannot have taken " +
                          std::to_string(batches) + " batches of a share of " +
                          std::to_string(share.size()) + " samples");
      }
      const auto end = std::min<size_t>(share.size(), static_cast<size_t>(taken));
      for (size_t i = 0; i < end; ++i) consumed[static_cast<size_t>(share[i])] = 1;
    }
    std::vector<int64_t> next;
    next.reserve(left.size());
    for (size_t i = 0; i < left.size(); ++i) {
      if (!consumed[i]) next.push_back(left[i]);
    }
    left = std::move(next);
  }
  return left;
}

std::vector<int64_t> elastic_order(const std::vector<int64_t>& global,
                                   const std::vector<ElasticStage>& stages,
                                   int64_t rank, int64_t world, ShareLayout layout,
                                   int64_t batch_size, bool drop_last) {
  const std::vector<int64_t> left = remaining_positions(
      static_cast<int64_t>(global.size()), stages, layout, batch_size, drop_last);
  std::vector<int64_t> out;
  for (int64_t i : rank_share(static_cast<int64_t>(left.size()), rank, world, layout,
                              batch_size, drop_last)) {
    out.push_back(global[static_cast<size_t>(left[static_cast<size_t>(i)])]);
  }
  return out;
}

}  // namespace ringloader::sampler
