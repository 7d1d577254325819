// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/node_order.h"

#include <string>

#include "ringloader/epoch_order.h"
#include "ringloader/errors.h"

namespace ringloader::node {

int64_t batches_per_lane(int64_t dataset_size, const LoaderOptions& options, int lanes) {
  if (options.batch_size < 1) {
    throw OptionError("ringloader: batch_size must be >= 1, got " +
                      std::to_string(options.batch_size));
  }
  const int64_t round = options.batch_size * lanes;
  const int64_t rounds = options.drop_last ? dataset_size / round
                                           : (dataset_size + round - 1) / round;
  if (rounds == 0) {
    throw OptionError("ringloader: drop_last with " + std::to_string(lanes) +
                      " trainers of batch_size " + std::to_string(options.batch_size) +
                      " needs at least " + std::to_string(round) + " samples; the dataset has " +
                      std::to_string(dataset_size));
  }
  return rounds;
}

std::vector<int64_t> node_epoch_order(int64_t dataset_size, const LoaderOptions& options,
                                      int lanes, int64_t epoch) {
  LoaderOptions one_rank = options;
  one_rank.rank = 0;
  one_rank.world_size = 1;
  one_rank.drop_last = false;
  std::vector<int64_t> order = epoch_order(dataset_size, one_rank, epoch);
  const size_t wanted = static_cast<size_t>(batches_per_lane(dataset_size, options, lanes) *
                                            lanes * options.batch_size);
  const size_t base = order.size();
  // Padding wraps around like DistributedSampler's, so every sample of the
  // epoch is served and the pad repeats the order's first samples.
  for (size_t i = base; i < wanted; ++i) order.push_back(order[i % base]);
  order.resize(wanted);
  return order;
}

}  // namespace ringloader::node
