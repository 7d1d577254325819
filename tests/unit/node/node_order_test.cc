// SPDX-License-Identifier: BSD-3-Clause
// How a node deals an epoch to its lanes (loader/node/node_order.h).
#include <gtest/gtest.h>

#include <set>

#include "loader/node/node_order.h"
#include "ringloader/epoch_order.h"
#include "ringloader/errors.h"

namespace ringloader::node {
namespace {

LoaderOptions batches_of(int64_t batch_size, bool drop_last = false) {
  LoaderOptions options;
  options.batch_size = batch_size;
  options.drop_last = drop_last;
  options.shuffle = true;
  options.seed = 9;
  options.rank = 0;
  options.world_size = 1;
  return options;
}

TEST(NodeOrder, WholeRoundsOfLanes) {
  EXPECT_EQ(batches_per_lane(10, batches_of(2), 2), 3);   // 10 -> 12 samples
  EXPECT_EQ(batches_per_lane(12, batches_of(2), 2), 3);
  EXPECT_EQ(batches_per_lane(10, batches_of(2, true), 2), 2);  // 10 -> 8
  EXPECT_EQ(batches_per_lane(1, batches_of(4), 8), 1);
}

TEST(NodeOrder, RefusesNoBatches) {
  EXPECT_THROW(batches_per_lane(10, batches_of(0), 2), OptionError);
  EXPECT_THROW(batches_per_lane(3, batches_of(2, true), 2), OptionError);
}

TEST(NodeOrder, PadsByWrappingTheOneRankOrder) {
  LoaderOptions options = batches_of(2);
  options.rank = 1;  // the node is one rank whatever the options say
  options.world_size = 3;
  const std::vector<int64_t> order = node_epoch_order(10, options, 2, 4);
  LoaderOptions one = batches_of(2);
  const std::vector<int64_t> base = epoch_order(10, one, 4);
  ASSERT_EQ(order.size(), 12u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], base[i % 10]) << i;
  EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 10u);
}

TEST(NodeOrder, DropLastCutsToWholeRounds) {
  const std::vector<int64_t> order = node_epoch_order(10, batches_of(2, true), 2, 0);
  const std::vector<int64_t> base = epoch_order(10, batches_of(2), 0);
  EXPECT_EQ(order, std::vector<int64_t>(base.begin(), base.begin() + 8));
}

}  // namespace
}  // namespace ringloader::node
