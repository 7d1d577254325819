// SPDX-License-Identifier: BSD-3-Clause
// The epoch object alone (loader/trainer/epoch.h): orders, plans, cursor,
// restored positions and elastic history, with no ring and no process.
#include <gtest/gtest.h>

#include <set>

#include "loader/trainer/epoch.h"
#include "loader/trainer/epoch_order.h"
#include "ringloader/errors.h"

namespace ringloader::trainer {
namespace {

sampler::SamplerOptions batching(int64_t size, int64_t batch_size, int64_t rank = 0,
                                 int64_t world = 1, bool drop_last = false) {
  sampler::SamplerOptions options;
  options.dataset_size = size;
  options.batch_size = batch_size;
  options.shuffle = true;
  options.seed = 5;
  options.rank = rank;
  options.world_size = world;
  options.drop_last = drop_last;
  return options;
}

Epoch make(int64_t size, int64_t batch_size, int64_t rank = 0, int64_t world = 1) {
  return Epoch(sampler::Sampler(batching(size, batch_size, rank, world)), rank, world);
}

void no_check(const std::vector<int64_t>&) {}

TEST(Epoch, StartsEpochsInTurnWithTheSamplersOrder) {
  Epoch epoch = make(10, 3);
  EXPECT_FALSE(epoch.open());
  EXPECT_EQ(epoch.size(), 4);
  EXPECT_EQ(epoch.start(), 0u);
  epoch.opened(100);
  EXPECT_TRUE(epoch.open());
  EXPECT_EQ(epoch.epoch(), 0);
  EXPECT_EQ(epoch.batch_count(), 4);
  EXPECT_EQ(epoch.order(), sampler::Sampler(batching(10, 3)).order(0));
  EXPECT_EQ(epoch.batch_id(0), 100u);
  EXPECT_EQ(epoch.expected_samples(), 3u);
  for (int i = 0; i < 3; ++i) epoch.advance();
  EXPECT_EQ(epoch.expected_samples(), 1u);  // the short last batch
  epoch.advance();
  EXPECT_TRUE(epoch.done());
  epoch.start();
  EXPECT_EQ(epoch.epoch(), 1);  // each start advances the epoch
  epoch.set_epoch(7);
  epoch.start();
  EXPECT_EQ(epoch.epoch(), 7);
  EXPECT_THROW(epoch.set_epoch(-1), OptionError);
}

TEST(Epoch, CustomOrderServesOneEpoch) {
  Epoch epoch = make(10, 2);
  epoch.set_order({9, 8, 7});
  EXPECT_EQ(epoch.size(), 2);
  epoch.start();
  EXPECT_EQ(epoch.order(), (std::vector<int64_t>{9, 8, 7}));
  LoaderState state;
  epoch.opened(0);
  epoch.advance();
  epoch.fill_state(state, 0);
  EXPECT_EQ(state.order, (std::vector<int64_t>{9, 8, 7}));  // saved: not reproducible
  EXPECT_EQ(state.batches_consumed, 1);
  epoch.start();
  EXPECT_EQ(epoch.order().size(), 10u);  // the sampler's again
}

TEST(Epoch, StateBetweenAndWithinEpochs) {
  Epoch epoch = make(10, 2);
  LoaderState before;
  epoch.fill_state(before, 0);
  EXPECT_EQ(before.epoch, 0);
  EXPECT_EQ(before.batches_consumed, 0);
  EXPECT_EQ(before.batches_in_epoch, 5);
  epoch.set_epoch(3);
  epoch.start();
  epoch.opened(40);
  epoch.advance();
  epoch.advance();
  LoaderState within;
  epoch.fill_state(within, 1);  // one batch staged, not handed out
  EXPECT_EQ(within.epoch, 3);
  EXPECT_EQ(within.batches_consumed, 1);
  EXPECT_TRUE(within.order.empty());
  EXPECT_EQ(within.order_hash, order_hash(epoch.order()));
}

TEST(Epoch, ResumeSkipsTheConsumedBatches) {
  Epoch saver = make(10, 2);
  saver.set_epoch(2);
  saver.start();
  saver.opened(0);
  saver.advance();
  saver.advance();
  LoaderState state;
  saver.fill_state(state, 0);
  state.world_size = 1;

  Epoch resumed = make(10, 2);
  resumed.load(state, no_check);
  ASSERT_TRUE(resumed.loaded());
  EXPECT_EQ(resumed.start(), 4u);  // samples of the two batches are skipped
  resumed.opened(7);
  EXPECT_EQ(resumed.epoch(), 2);
  EXPECT_EQ(resumed.cursor(), 2);
  EXPECT_EQ(resumed.offset(), 2);
  EXPECT_EQ(resumed.batch_id(2), 7u);  // the plan starts at the cursor
  EXPECT_EQ(resumed.order(), saver.order());
  EXPECT_FALSE(resumed.loaded());
  resumed.start();  // the next epoch starts from its beginning
  EXPECT_EQ(resumed.epoch(), 3);
  EXPECT_EQ(resumed.cursor(), 0);
}

TEST(Epoch, ACompleteEpochIsSkippedAndAnotherEpochDropsTheState) {
  LoaderState state;
  state.epoch = 4;
  state.batches_consumed = 5;
  state.batches_in_epoch = 5;
  Epoch epoch = make(10, 2);
  epoch.load(state, no_check);
  epoch.start();
  EXPECT_EQ(epoch.epoch(), 5);
  state.batches_consumed = 1;
  state.order_hash = order_hash(sampler::Sampler(batching(10, 2)).order(4));
  epoch.load(state, no_check);
  epoch.set_epoch(6);
  EXPECT_FALSE(epoch.loaded());
  epoch.start();
  EXPECT_EQ(epoch.cursor(), 0);
}

TEST(Epoch, RefusesAStateItCannotReproduce) {
  LoaderState state;
  state.epoch = 1;
  state.batches_consumed = 1;
  state.batches_in_epoch = 5;
  state.order_hash = 12345;  // not this sampler's order
  Epoch epoch = make(10, 2);
  EXPECT_THROW(epoch.load(state, no_check), OptionError);
  state.batches_in_epoch = 6;
  EXPECT_THROW(epoch.load(state, no_check), OptionError);
  // A custom order does not move to another world size.
  state.order = {1, 2, 3};
  state.world_size = 2;
  EXPECT_THROW(epoch.load(state, no_check), OptionError);
}

TEST(Epoch, ACustomOrderIsCheckedBeforeItIsTaken) {
  LoaderState state;
  state.epoch = 0;
  state.batches_consumed = 1;
  state.batches_in_epoch = 2;
  state.order = {4, 3, 2};
  state.order_hash = order_hash(state.order);
  Epoch epoch = make(10, 2);
  int checked = 0;
  epoch.load(state, [&](const std::vector<int64_t>& order) {
    EXPECT_EQ(order, state.order);
    ++checked;
  });
  EXPECT_EQ(checked, 1);
  epoch.start();
  EXPECT_EQ(epoch.order(), state.order);
  EXPECT_EQ(epoch.cursor(), 1);
  EXPECT_EQ(epoch.expected_samples(), 1u);
}

TEST(Epoch, ElasticResumeSplitsWhatIsLeft) {
  // Two ranks each took one batch of 2; the job goes on with one rank.
  std::set<int64_t> consumed;
  LoaderState state;
  for (int rank = 0; rank < 2; ++rank) {
    Epoch saver = make(12, 2, rank, 2);
    saver.start();
    saver.opened(0);
    consumed.insert(saver.order().begin(), saver.order().begin() + 2);
    saver.advance();
    saver.fill_state(state, 0);
  }
  state.rank = 1;
  state.world_size = 2;
  Epoch epoch = make(12, 2);
  epoch.load(state, no_check);
  EXPECT_EQ(epoch.start(), 0u);  // a new order: nothing of it is consumed
  epoch.opened(0);
  EXPECT_EQ(epoch.cursor(), 0);
  for (int64_t index : epoch.order()) EXPECT_TRUE(consumed.insert(index).second) << index;
  EXPECT_EQ(consumed.size(), 12u);
  LoaderState again;
  epoch.fill_state(again, 0);
  ASSERT_EQ(again.elastic.size(), 1u);  // a second resume knows the first
  EXPECT_EQ(again.elastic[0].world_size, 2);
  EXPECT_EQ(again.elastic[0].batches, (std::vector<int64_t>{1, 1}));
}

}  // namespace
}  // namespace ringloader::trainer
