// SPDX-License-Identifier: BSD-3-Clause
// Elastic resume and weighted mixing at the sampler level: pure functions,
// checked over many world-size transitions and draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "loader/sampler/elastic.h"
#include "loader/sampler/mix_order.h"
#include "loader/sampler/sampler.h"
#include "ringloader/errors.h"

namespace ringloader::sampler {
namespace {

SamplerOptions base(int64_t n, int64_t batch, int64_t rank, int64_t world) {
  SamplerOptions out;
  out.dataset_size = n;
  out.batch_size = batch;
  out.shuffle = true;
  out.seed = 7;
  out.rank = rank;
  out.world_size = world;
  return out;
}

// Everything a job delivers in epoch 0: `consumed` batches per rank at
// world w0, then the rest at w1. Checks coverage and equal counts.
void check_transition(int64_t n, int64_t batch, int64_t w0, int64_t consumed,
                      int64_t w1, bool sharded) {
  SCOPED_TRACE("n=" + std::to_string(n) + " " + std::to_string(w0) + "->" +
               std::to_string(w1) + " after " + std::to_string(consumed) +
               (sharded ? " sharded" : ""));
  std::map<int64_t, int> seen;
  std::vector<int64_t> global;
  Sampler any(base(n, batch, 0, w0));
  if (sharded) {
    auto opts = base(n, batch, 0, w0);
    opts.shard_sizes = {n / 3, n / 3, n - 2 * (n / 3)};
    opts.shuffle_buffer = 4;
    any = Sampler(opts);
  }
  any.global_order(0, global);
  for (int64_t r = 0; r < w0; ++r) {
    auto opts = any.options();
    opts.rank = r;
    auto order = Sampler(opts).order(0);
    for (int64_t i = 0; i < consumed * batch && i < static_cast<int64_t>(order.size()); ++i) {
      ++seen[order[static_cast<size_t>(i)]];
    }
  }
  const std::vector<ElasticStage> stages{{w0, std::vector<int64_t>(w0, consumed)}};
  std::set<size_t> sizes;
  for (int64_t r = 0; r < w1; ++r) {
    auto order = elastic_order(global, stages, r, w1, any.layout(), batch, false);
    sizes.insert(order.size());
    for (int64_t sample : order) ++seen[sample];
  }
  EXPECT_EQ(sizes.size(), 1u) << "ranks got unequal counts";
  EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << "a sample was never delivered";
  int64_t extra = 0;
  for (auto& [sample, count] : seen) extra += count - 1;
  // Padding only: at most world - 1 repeats per stage.
  EXPECT_LE(extra, (w0 - 1) + (w1 - 1));
}

TEST(Elastic, EveryTransitionCoversTheEpochOnceWithEqualCounts) {
  for (bool sharded : {false, true}) {
    for (int64_t w0 : {1, 2, 3, 4}) {
      for (int64_t w1 : {1, 2, 3, 4, 5}) {
        for (int64_t consumed : {0, 1, 2, 3}) check_transition(37, 3, w0, consumed, w1, sharded);
      }
    }
  }
}

TEST(Elastic, TwoResumesWithinAnEpochStillCoverItOnce) {
  // 4 -> 3 after 2 batches, 3 -> 2 after 1 more.
  const int64_t n = 50, batch = 2;
  Sampler sampler(base(n, batch, 0, 4));
  std::vector<int64_t> global;
  sampler.global_order(3, global);
  std::map<int64_t, int> seen;
  std::vector<ElasticStage> stages;
  auto take = [&](int64_t world, int64_t batches) {
    for (int64_t r = 0; r < world; ++r) {
      auto order = elastic_order(global, stages, r, world, ShareLayout::kInterleaved, batch, false);
      for (int64_t i = 0; i < batches * batch && i < static_cast<int64_t>(order.size()); ++i) {
        ++seen[order[static_cast<size_t>(i)]];
      }
    }
    stages.push_back({world, std::vector<int64_t>(world, batches)});
  };
  take(4, 2);
  take(3, 1);
  take(2, 100);  // to the end
  EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
  int64_t extra = 0;
  for (auto& [sample, count] : seen) extra += count - 1;
  EXPECT_LE(extra, 3 + 2 + 1);
}

TEST(Elastic, NoStagesIsTheSamplersOwnOrder) {
  for (int64_t r = 0; r < 3; ++r) {
    Sampler sampler(base(20, 4, r, 3));
    std::vector<int64_t> global;
    sampler.global_order(2, global);
    EXPECT_EQ(elastic_order(global, {}, r, 3, sampler.layout(), 4, false), sampler.order(2));
  }
}

TEST(Elastic, ImpossibleCountsAreOptionErrors) {
  EXPECT_THROW(remaining_positions(10, {{2, {9, 0}}}, ShareLayout::kInterleaved, 2, false),
               OptionError);
  EXPECT_THROW(remaining_positions(10, {{2, {1}}}, ShareLayout::kInterleaved, 2, false),
               OptionError);
}

TEST(Mix, CountsFollowTheWeightsAndSumToTheEpoch) {
  EXPECT_EQ(choose_from_weights({100, 200}, {0.25, 0.75}, 0), (std::vector<int64_t>{75, 225}));
  EXPECT_EQ(choose_from_weights({100, 200}, {1, 3}, 400), (std::vector<int64_t>{100, 300}));
  EXPECT_EQ(choose_from_weights({10, 10, 10}, {1, 1, 1}, 10), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_THROW(choose_from_weights({10}, {0}, 0), OptionError);
  EXPECT_THROW(choose_from_weights({0, 5}, {1, 1}, 0), OptionError);
}

TEST(Mix, OrderDrawsExactlyChoosePerStreamAndUpsamplesByWholePasses) {
  const std::vector<MixStream> streams{{10, 25, {}}, {40, 5, {}}};
  for (bool shuffle : {false, true}) {
    std::vector<int64_t> order;
    mix_order(streams, shuffle, 0, 3, 1, order);
    ASSERT_EQ(order.size(), 30u);
    std::map<int64_t, int> count;
    int64_t from_first = 0;
    for (int64_t i : order) {
      ++count[i];
      from_first += i < 10;
    }
    EXPECT_EQ(from_first, 25);
    for (int64_t i = 0; i < 10; ++i) EXPECT_GE(count[i], 2) << "whole passes first";
    for (int64_t i = 10; i < 50; ++i) EXPECT_LE(count[i], 1) << "a subset, no repeats";
  }
  std::vector<int64_t> a, b, c;
  mix_order(streams, true, 0, 3, 1, a);
  mix_order(streams, true, 0, 3, 1, b);
  mix_order(streams, true, 0, 3, 2, c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Mix, SamplerShardsAMixLikeAnyEpoch) {
  auto opts = base(50, 4, 0, 3);
  opts.mix = {{10, 21, {}}, {40, 9, {}}};
  std::map<int64_t, int> seen;
  for (int64_t r = 0; r < 3; ++r) {
    opts.rank = r;
    Sampler sampler(opts);
    EXPECT_EQ(sampler.samples_per_epoch(), 10);
    for (int64_t i : sampler.order(0)) ++seen[i];
  }
  int64_t total = 0, first = 0;
  for (auto& [i, n] : seen) {
    total += n;
    if (i < 10) first += n;
  }
  EXPECT_EQ(total, 30);
  EXPECT_EQ(first, 21);
}

}  // namespace
}  // namespace ringloader::sampler
