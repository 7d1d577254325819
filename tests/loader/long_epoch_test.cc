// SPDX-License-Identifier: BSD-3-Clause
// Epochs longer than the ring's order table: the trainer publishes their
// order a window at a time (Loader::Impl::publish_more) and workers read
// entries modulo the table. Each row holds its own index, so a batch whose
// worker read a stale or wrapped entry holds the wrong rows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

// Past the smallest window (65,536 samples) by more than two windows.
constexpr int64_t kRows = 150'001;

struct Rows {
  std::vector<int32_t> values;
  Rows() : values(kRows) { std::iota(values.begin(), values.end(), 0); }
  Dataset dataset() const {
    TensorRowsData data;
    data.rows = values.data();
    data.row_count = kRows;
    data.type = ElementType::kInt32;
    return Dataset::tensor_rows(data);
  }
};

LoaderOptions options(int workers, bool shuffle) {
  LoaderOptions out = testing::make_options(64, workers);
  out.shuffle = shuffle;
  out.seed = 5;
  out.ring_slots = 4;
  return out;
}

// Every batch's rows are its sample indices; returns the indices in order.
std::vector<int64_t> take(Loader& loader, int64_t max_batches = -1) {
  std::vector<int64_t> seen;
  for (int64_t b = 0; max_batches < 0 || b < max_batches; ++b) {
    std::optional<Batch> batch = loader.next();
    if (!batch) break;
    const torch::Tensor rows = batch->data.reshape({-1}).to(torch::kInt64);
    const std::vector<int64_t> values(rows.data_ptr<int64_t>(),
                                      rows.data_ptr<int64_t>() + rows.numel());
    EXPECT_EQ(values, batch->sample_indices) << "batch " << batch->index;
    seen.insert(seen.end(), batch->sample_indices.begin(), batch->sample_indices.end());
  }
  return seen;
}

std::vector<int64_t> one_epoch(Loader& loader) {
  loader.begin_epoch();
  return take(loader);
}

TEST(LongEpoch, ACustomOrderLongerThanTheWindowIsTakenInOrder) {
  const Rows rows;
  std::vector<int64_t> order(kRows);
  std::iota(order.rbegin(), order.rend(), 0);  // every window's entries differ
  for (int workers : {0, 2}) {
    Loader loader(rows.dataset(), Pipeline{}, options(workers, false));
    loader.set_order(order);
    EXPECT_EQ(one_epoch(loader), order) << "workers " << workers;
  }
}

TEST(LongEpoch, AShuffledEpochHoldsEverySampleOnceWhateverTheWorkers) {
  const Rows rows;
  Loader in_process(rows.dataset(), Pipeline{}, options(0, true));
  const std::vector<int64_t> expected = one_epoch(in_process);
  std::vector<int64_t> sorted = expected;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(kRows);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  LoaderOptions dropping = options(2, true);
  dropping.drop_last = true;
  Loader workers(rows.dataset(), Pipeline{}, dropping);
  const std::vector<int64_t> dropped = one_epoch(workers);
  ASSERT_EQ(dropped.size(), static_cast<size_t>(kRows / 64 * 64));
  EXPECT_TRUE(std::equal(dropped.begin(), dropped.end(), expected.begin()));
  // A second epoch is a new plan in the other order table.
  EXPECT_EQ(one_epoch(workers).size(), dropped.size());
}

TEST(LongEpoch, AResumePastTheFirstWindowGoesOnWithTheSameSamples) {
  const Rows rows;
  Loader first(rows.dataset(), Pipeline{}, options(2, true));
  first.begin_epoch();
  const std::vector<int64_t> head = take(first, 1500);  // 96,000 samples in
  const LoaderState state = first.state_dict();
  const std::vector<int64_t> tail = take(first);
  Loader resumed(rows.dataset(), Pipeline{}, options(2, true));
  resumed.load_state_dict(state);
  EXPECT_EQ(one_epoch(resumed), tail);
  EXPECT_EQ(head.size() + tail.size(), static_cast<size_t>(kRows));
}

}  // namespace
}  // namespace ringloader
