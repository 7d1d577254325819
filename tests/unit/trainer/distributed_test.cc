// SPDX-License-Identifier: BSD-3-Clause
// Rank and world size from options or torchrun's environment, the sampler
// they make, a mix's streams, and the public epoch_order()
// (loader/trainer/distributed.h, epoch_order.h).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <set>

#include "loader/trainer/distributed.h"
#include "loader/trainer/epoch_order.h"
#include "ringloader/errors.h"

namespace ringloader::trainer {
namespace {

// Sets (or, with nullptr, unsets) torchrun's variables for one test.
class Environment {
 public:
  Environment(const char* rank, const char* world, const char* local_rank) {
    set("RANK", rank);
    set("WORLD_SIZE", world);
    set("LOCAL_RANK", local_rank);
  }
  ~Environment() {
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("LOCAL_RANK");
  }

 private:
  static void set(const char* name, const char* value) {
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
};

TEST(Distributed, UnsetMeansOneRank) {
  Environment env(nullptr, nullptr, nullptr);
  const LoaderOptions resolved = resolve_distributed(LoaderOptions{});
  EXPECT_EQ(resolved.rank, 0);
  EXPECT_EQ(resolved.world_size, 1);
  EXPECT_EQ(resolved.device, "cpu");
}

TEST(Distributed, ReadsTorchrunsVariables) {
  Environment env("2", "4", "1");
  LoaderOptions options;
  options.device = "cuda";
  const LoaderOptions resolved = resolve_distributed(options);
  EXPECT_EQ(resolved.rank, 2);
  EXPECT_EQ(resolved.world_size, 4);
  EXPECT_EQ(resolved.device, "cuda:1");
  options.rank = 0;  // given options win over the environment
  options.world_size = 2;
  options.device = "cuda:3";
  const LoaderOptions given = resolve_distributed(options);
  EXPECT_EQ(given.rank, 0);
  EXPECT_EQ(given.world_size, 2);
  EXPECT_EQ(given.device, "cuda:3");
}

TEST(Distributed, RefusesImpossibleRanks) {
  {
    Environment env("4", "4", nullptr);
    EXPECT_THROW(resolve_distributed(LoaderOptions{}), OptionError);
  }
  {
    Environment env("one", "4", nullptr);
    EXPECT_THROW(resolve_distributed(LoaderOptions{}), OptionError);
  }
  Environment env(nullptr, nullptr, nullptr);
  LoaderOptions options;
  options.world_size = 0;
  EXPECT_THROW(resolve_distributed(options), OptionError);
  options.world_size = 2;
  options.rank = 2;
  EXPECT_THROW(resolve_distributed(options), OptionError);
}

TEST(Distributed, MixStreamsSplitTheShards) {
  const std::vector<MixPart> parts = {{10, 4, 2}, {5, 6, 1}};
  const auto streams = mix_streams(parts, {6, 4, 5});
  ASSERT_EQ(streams.size(), 2u);
  EXPECT_EQ(streams[0].size, 10);
  EXPECT_EQ(streams[0].choose, 4);
  EXPECT_EQ(streams[0].shard_sizes, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(streams[1].shard_sizes, (std::vector<int64_t>{5}));
  EXPECT_TRUE(mix_streams(parts, {})[0].shard_sizes.empty());
}

TEST(EpochOrder, RanksShareOnePaddedPermutation) {
  Environment env(nullptr, nullptr, nullptr);
  LoaderOptions options;
  options.shuffle = true;
  options.seed = 11;
  options.world_size = 3;
  std::multiset<int64_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    options.rank = rank;
    const std::vector<int64_t> order = epoch_order(10, options, 5);
    EXPECT_EQ(order.size(), 4u);  // ceil(10 / 3), padded by wrapping around
    seen.insert(order.begin(), order.end());
  }
  for (int64_t i = 0; i < 10; ++i) EXPECT_GE(seen.count(i), 1u) << i;
  EXPECT_EQ(seen.size(), 12u);
  options.rank = 0;
  EXPECT_EQ(epoch_order(10, options, 5), epoch_order(10, options, 5));
  EXPECT_NE(epoch_order(10, options, 5), epoch_order(10, options, 6));
  EXPECT_THROW(epoch_order(10, options, -1), OptionError);
}

TEST(EpochOrder, SequentialWithoutShuffle) {
  Environment env(nullptr, nullptr, nullptr);
  LoaderOptions options;
  options.rank = 1;
  options.world_size = 2;
  EXPECT_EQ(epoch_order(5, options, 0), (std::vector<int64_t>{1, 3, 0}));
}

TEST(EpochOrder, ElasticHistoryGivesTheRestOfTheEpoch) {
  Environment env(nullptr, nullptr, nullptr);
  LoaderOptions options;
  options.shuffle = true;
  options.seed = 3;
  options.batch_size = 2;
  options.world_size = 2;
  // Two ranks took one batch each (4 samples); one rank goes on alone.
  std::vector<int64_t> consumed;
  for (int rank = 0; rank < 2; ++rank) {
    options.rank = rank;
    const std::vector<int64_t> order = epoch_order(12, options, 1);
    consumed.insert(consumed.end(), order.begin(), order.begin() + 2);
  }
  options.rank = 0;
  options.world_size = 1;
  const std::vector<int64_t> rest =
      epoch_order(12, options, 1, {}, {ElasticStage{2, {1, 1}}});
  std::set<int64_t> all(consumed.begin(), consumed.end());
  for (int64_t index : rest) EXPECT_TRUE(all.insert(index).second) << index;
  EXPECT_EQ(all.size(), 12u);
}

TEST(EpochOrder, StagesConvertBothWays) {
  const std::vector<ElasticStage> stages = {{2, {3, 4}}, {3, {1, 1, 2}}};
  const std::vector<ElasticStage> back = from_stages(to_stages(stages));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].world_size, 3);
  EXPECT_EQ(back[1].batches, (std::vector<int64_t>{1, 1, 2}));
}

}  // namespace
}  // namespace ringloader::trainer
