// SPDX-License-Identifier: BSD-3-Clause
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "loader/sampler/sampler.h"
#include "loader/sampler/shard_order.h"
#include "ringloader/errors.h"

namespace ringloader::sampler {
namespace {

SamplerOptions options(int64_t n, int64_t batch, bool shuffle) {
  SamplerOptions out;
  out.dataset_size = n;
  out.batch_size = batch;
  out.shuffle = shuffle;
  out.seed = 99;
  return out;
}

TEST(Sampler, SequentialWithShortLastBatch) {
  Sampler sampler(options(10, 4, false));
  EXPECT_EQ(sampler.batches_per_epoch(), 3);
  auto order = sampler.order(0);
  std::vector<int64_t> expected(10);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(order, expected);
}

TEST(Sampler, DropLastTrims) {
  auto opts = options(10, 4, true);
  opts.drop_last = true;
  Sampler sampler(opts);
  EXPECT_EQ(sampler.batches_per_epoch(), 2);
  EXPECT_EQ(sampler.order(3).size(), 8u);
}

TEST(Sampler, ShuffleIsAPermutationPerEpochAndReproducible) {
  Sampler sampler(options(1000, 10, true));
  auto a = sampler.order(0), b = sampler.order(1), again = sampler.order(0);
  EXPECT_EQ(a, again);
  EXPECT_NE(a, b);
  std::set<int64_t> unique(a.begin(), a.end());
  EXPECT_EQ(unique.size(), 1000u);
  EXPECT_EQ(*unique.begin(), 0);
  EXPECT_EQ(*unique.rbegin(), 999);
}

TEST(Sampler, ShuffleIsRoughlyUniform) {
  // Position of element 0 over many epochs: each quarter gets ~25%.
  std::vector<int> quarters(4);
  for (uint64_t epoch = 0; epoch < 4000; ++epoch) {
    auto order = shuffled_indices(100, 5, epoch);
    auto where = std::find(order.begin(), order.end(), 0) - order.begin();
    ++quarters[where / 25];
  }
  for (int count : quarters) {
    EXPECT_GT(count, 850);  // expected 1000, sd ~27
    EXPECT_LT(count, 1150);
  }
}

TEST(Sampler, DistributedRanksCoverEverythingWithEqualCounts) {
  for (int64_t world : {1, 2, 3}) {
    std::multiset<int64_t> all;
    size_t per_rank = 0;
    for (int64_t rank = 0; rank < world; ++rank) {
      auto opts = options(10, 2, true);
      opts.rank = rank;
      opts.world_size = world;
      auto order = Sampler(opts).order(4);
      if (rank == 0) per_rank = order.size();
      EXPECT_EQ(order.size(), per_rank);
      all.insert(order.begin(), order.end());
    }
    std::set<int64_t> unique(all.begin(), all.end());
    EXPECT_EQ(unique.size(), 10u) << world;
    EXPECT_EQ(all.size(), per_rank * world);  // padding repeats a few
  }
}

TEST(Sampler, DistributedPaddingWrapsLikeTorch) {
  // torch pads with indices[:padding] (repeated when the padding is longer
  // than the dataset), then takes indices[rank::world]: 2 samples on 5
  // ranks give rank r sample r % 2, one each.
  for (int64_t rank = 0; rank < 5; ++rank) {
    auto opts = options(2, 1, false);
    opts.rank = rank;
    opts.world_size = 5;
    Sampler sampler(opts);
    EXPECT_EQ(sampler.batches_per_epoch(), 1);
    EXPECT_EQ(sampler.order(0), (std::vector<int64_t>{rank % 2}));
  }
  // 10 samples on 3 ranks: 4 each, positions 10 and 11 wrap to 0 and 1.
  auto opts = options(10, 4, false);
  opts.rank = 2;
  opts.world_size = 3;
  EXPECT_EQ(Sampler(opts).order(0), (std::vector<int64_t>{2, 5, 8, 1}));
}

TEST(Sampler, RejectsBadOptions) {
  EXPECT_THROW(Sampler(options(10, 0, false)), OptionError);
  auto opts = options(10, 2, false);
  opts.rank = 2;
  opts.world_size = 2;
  EXPECT_THROW(Sampler{opts}, OptionError);
}

// The streamed order (one shard at a time, in visit order) is the whole
// order, prefix by prefix, whatever the samples are called: a first epoch
// can start before later shards are counted.
TEST(ShardShuffleStream, EachShardGivenExtendsAPrefixOfTheWholeOrder) {
  const std::vector<int64_t> sizes = {5, 0, 17, 3, 40, 1, 9};
  std::vector<int64_t> first(sizes.size());
  std::exclusive_scan(sizes.begin(), sizes.end(), first.begin(), int64_t{0});
  for (int64_t buffer : {0, 1, 8, 1000}) {
    std::vector<int64_t> whole;
    shard_shuffle_order(sizes, buffer, 21, 3, whole);
    // Samples named (shard << 32) | ordinal, as a stream that knows no
    // dataset index would name them.
    ShardShuffleStream stream(buffer, 21, 3);
    std::vector<int64_t> streamed;
    for (int64_t shard : shard_visit_order(static_cast<int64_t>(sizes.size()), 21, 3)) {
      const size_t before = streamed.size();
      stream.add_shard(shard << 32, sizes[shard], streamed);
      for (size_t i = before; i < streamed.size(); ++i) {
        const int64_t s = streamed[i] >> 32;
        ASSERT_EQ(first[s] + (streamed[i] & 0xffffffff), whole[i]) << "buffer " << buffer;
      }
    }
    stream.finish(streamed);
    ASSERT_EQ(streamed.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(first[streamed[i] >> 32] + (streamed[i] & 0xffffffff), whole[i]);
    }
  }
}

// Issue 46: the first samples leave the buffer once kShuffleInitial are
// in, not once shuffle_buffer are (WebDataset's shuffle(n, initial)), so
// the first batch of a 1000-sample buffer waits for ~164 samples, not 1032.
TEST(ShardShuffleStream, LetsSamplesOutBeforeTheBufferIsFull) {
  ShardShuffleStream stream(1000, 7, 0);
  std::vector<int64_t> out;
  stream.add_shard(0, kShuffleInitial - 1, out);
  EXPECT_TRUE(out.empty());
  // Growing, it takes two samples per one it lets out.
  stream.add_shard(kShuffleInitial - 1, 65, out);
  EXPECT_EQ(out.size(), 33u);
  stream.finish(out);
  std::vector<int64_t> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < static_cast<int64_t>(sorted.size()); ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(sorted.size(), 164u);
  // Still mixed: the first 32 out are not archive order.
  EXPECT_FALSE(std::is_sorted(out.begin(), out.begin() + 32));
}

}  // namespace
}  // namespace ringloader::sampler
