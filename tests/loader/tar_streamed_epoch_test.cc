// SPDX-License-Identifier: BSD-3-Clause
// pipe: shards indexed in the background (TarShardOptions::
// index_in_background): the first epoch starts after its first shard is
// indexed, holds the batches a full index gives, and everything that needs
// the whole index (state_dict, size, the next epoch) waits for it.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <thread>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

constexpr int kShards = 5;  // 7, 7, 7, 7, 2 samples

LoaderOptions loader_options(int workers, bool shuffle, bool drop_last) {
  LoaderOptions options = testing::make_options(4, workers);
  options.shuffle = shuffle;
  options.drop_last = drop_last;
  options.seed = 31;
  return options;
}

struct Epochs {
  std::vector<torch::Tensor> data, targets;
  std::vector<std::vector<int64_t>> indices;
};

class StreamedEpoch : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "images", 3, 10, "png");
    ASSERT_EQ(std::system(("mkdir -p '" + (dir_ / "shards") + "'").c_str()), 0);
    const std::string command = "'" + testing::sibling_executable("ringloader-shard") + "' '" + (dir_ / "images") + "' '" +
                                (dir_ / "shards") + "/s-%04d.tar' --max-count 7 > /dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  std::string shard(int s) const {
    char name[32];
    std::snprintf(name, sizeof(name), "shards/s-%04d.tar", s);
    return dir_ / name;
  }
  // Shard `open` streams at once; the others wait for the gate file.
  std::vector<std::string> gated_urls(int open) const {
    std::vector<std::string> urls;
    for (int s = 0; s < kShards; ++s) {
      urls.push_back(s == open ? "pipe:cat '" + shard(s) + "'"
                               : "pipe:sh -c 'while [ ! -e \"" + gate() + "\" ]; do sleep 0.02; "
                                 "done; cat \"" + shard(s) + "\"'");
    }
    return urls;
  }
  std::vector<std::string> pipe_urls() const { return gated_urls(-1); }
  std::string gate() const { return dir_ / "gate"; }
  void open_gate() const { testing::write_file(gate(), "open"); }
  // Dataset indices of a batch's samples, whether named by index or by
  // shard (the full index's shard sizes turn one into the other).
  static std::vector<int64_t> by_index(std::vector<int64_t> indices) {
    const int64_t first[kShards] = {0, 7, 14, 21, 28};
    for (int64_t& index : indices) {
      if (!is_shard_sample(index)) continue;
      const ShardSample sample = shard_sample_of(index);
      index = first[sample.shard] + sample.ordinal;
    }
    return indices;
  }
  static Epochs run(Loader& loader, int epochs) {
    Epochs out;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      for (Batch& batch : loader) {
        out.data.push_back(batch.data.clone());
        out.targets.push_back(batch.target.clone());
        out.indices.push_back(by_index(batch.sample_indices));
      }
    }
    return out;
  }
  testing::TempDir dir_;
};

TEST_F(StreamedEpoch, TheEpochsAreTheOnesAFullIndexGives) {
  open_gate();
  TarShardOptions indexed_first;
  indexed_first.index_in_background = false;
  const Pipeline pipeline{RandomResizedCrop(12), ToTensor()};
  for (const bool shuffle : {true, false}) {
    for (const bool drop_last : {false, true}) {
      for (const int workers : {0, 2}) {
        const std::string what = "shuffle " + std::to_string(shuffle) + " drop_last " +
                                 std::to_string(drop_last) + " workers " + std::to_string(workers);
        Dataset full = Dataset::tar_shards(pipe_urls(), indexed_first);
        Loader reference(full, pipeline, loader_options(workers, shuffle, drop_last));
        const Epochs expected = run(reference, 2);
        Dataset background = Dataset::tar_shards(pipe_urls());
        Loader streamed(background, pipeline, loader_options(workers, shuffle, drop_last));
        const Epochs got = run(streamed, 2);
        ASSERT_EQ(got.data.size(), expected.data.size()) << what;
        for (size_t b = 0; b < got.data.size(); ++b) {
          EXPECT_TRUE(torch::equal(got.data[b], expected.data[b])) << what << " batch " << b;
          EXPECT_TRUE(torch::equal(got.targets[b], expected.targets[b])) << what;
          EXPECT_EQ(got.indices[b], expected.indices[b]) << what << " batch " << b;
        }
      }
    }
  }
}

// The shuffle buffer lets samples go once it is full: with 2 places and
// batches of 4, one shard of 7 gives the first batch.
TEST_F(StreamedEpoch, TheFirstBatchComesBeforeTheOtherShardsAreRead) {
  LoaderOptions options = loader_options(2, true, false);
  options.seed = 3;
  const int first = 1;  // seed 3's epoch 0 visits shard 1 first (shard_order.h)
  TarShardOptions shard_options;
  shard_options.shuffle_buffer = 2;
  std::atomic<bool> gate_opened{false};
  std::atomic<bool> finished{false};
  // A loader that waits for every shard would hang: the gate opens anyway,
  // late, and the test fails on the flag instead.
  std::thread late_gate([&] {
    for (int i = 0; i < 400 && !finished; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    gate_opened = true;
    open_gate();
  });
  const auto start = std::chrono::steady_clock::now();
  Dataset dataset = Dataset::tar_shards(gated_urls(first), shard_options);
  ASSERT_NE(dataset.background_index(), nullptr);
  Loader loader(dataset, Pipeline{Resize({8, 8}), ToTensor()}, options);
  loader.begin_epoch();
  std::optional<Batch> batch = loader.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_FALSE(gate_opened.load()) << "the first batch waited for every shard";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  EXPECT_NE(dataset.background_index(), nullptr);  // the others are not indexed yet
  for (int64_t index : batch->sample_indices) {
    ASSERT_TRUE(is_shard_sample(index));
    EXPECT_EQ(shard_sample_of(index).shard, first);
  }
  finished = true;
  late_gate.join();
  std::set<int64_t> seen;
  for (int64_t index : by_index(batch->sample_indices)) seen.insert(index);
  while ((batch = loader.next())) {
    for (int64_t index : by_index(batch->sample_indices)) seen.insert(index);
  }
  EXPECT_EQ(seen.size(), 30u);
  EXPECT_EQ(loader.size(), 8);
  EXPECT_EQ(dataset.size(), 30);
}

// A dataset dropped while its shards' commands still stall ends them: its
// destructor does not wait for a download to finish.
TEST_F(StreamedEpoch, ADatasetDroppedMidIndexEndsItsCommands) {
  const auto start = std::chrono::steady_clock::now();
  {
    Dataset dataset = Dataset::tar_shards(gated_urls(-1));  // never opened
    ASSERT_NE(dataset.background_index(), nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A child forked mid-index (by the trainer, a helper, multiprocessing's
// fork) that drops its copies of the Dataset and the Loader: their threads
// and shard commands are the parent's. Before, the child joined indexing
// threads it does not have (SIGSEGV, or a hang) and SIGTERMed the parent's
// commands, failing the parent's shards.
TEST_F(StreamedEpoch, AForkChildDroppingItsCopiesLeavesTheParentsIndexingAlone) {
  auto dataset = std::make_unique<Dataset>(Dataset::tar_shards(gated_urls(0)));
  ASSERT_NE(dataset->background_index(), nullptr);
  auto loader = std::make_unique<Loader>(*dataset, Pipeline{Resize({8, 8}), ToTensor()},
                                         loader_options(2, false, false));
  loader->begin_epoch();
  std::optional<Batch> first = loader->next();
  ASSERT_TRUE(first.has_value());
  ASSERT_NE(dataset->background_index(), nullptr) << "indexing must still run at the fork";
  std::fflush(nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    first.reset();
    loader.reset();
    dataset.reset();
    _exit(0);
  }
  ASSERT_EQ(testing::child_ending(child, 10), "exit 0");
  open_gate();
  std::set<int64_t> seen;
  for (int64_t index : by_index(first->sample_indices)) seen.insert(index);
  while (std::optional<Batch> batch = loader->next()) {
    for (int64_t index : by_index(batch->sample_indices)) seen.insert(index);
  }
  EXPECT_EQ(seen.size(), 30u) << "the parent's shard commands were ended by the child";
}

TEST_F(StreamedEpoch, AStateSavedMidEpochResumesInAnIndexedLoader) {
  open_gate();
  const LoaderOptions options = loader_options(2, true, false);
  const Pipeline pipeline{Resize({8, 8}), ToTensor()};
  Loader streamed(Dataset::tar_shards(pipe_urls()), pipeline, options);
  streamed.begin_epoch();
  for (int b = 0; b < 3; ++b) ASSERT_TRUE(streamed.next().has_value());
  const LoaderState state = streamed.state_dict();  // waits for the index
  EXPECT_EQ(state.batches_consumed, 3);
  EXPECT_EQ(state.batches_in_epoch, 8);
  std::vector<std::vector<int64_t>> tail;
  while (std::optional<Batch> batch = streamed.next()) tail.push_back(batch->sample_indices);
  TarShardOptions indexed_first;
  indexed_first.index_in_background = false;
  Loader resumed(Dataset::tar_shards(pipe_urls(), indexed_first), pipeline, options);
  resumed.load_state_dict(state);
  std::vector<std::vector<int64_t>> resumed_tail;
  for (Batch& batch : resumed) resumed_tail.push_back(batch.sample_indices);
  EXPECT_EQ(resumed_tail, tail);
}

TEST_F(StreamedEpoch, AShardThatFailsIsAnErrorNamingIt) {
  open_gate();
  std::vector<std::string> urls = pipe_urls();
  urls[2] = "pipe:sh -c 'head -c 700 \"" + shard(2) + "\"'";  // cut mid-member
  const LoaderOptions options = loader_options(2, false, false);
  Loader loader(Dataset::tar_shards(urls), Pipeline{Resize({8, 8}), ToTensor()}, options);
  int batches = 0;
  try {
    loader.begin_epoch();
    while (loader.next()) ++batches;
    FAIL() << "a truncated shard gave a whole epoch";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("s-0002.tar"), std::string::npos) << error.what();
  }
  // Unshuffled, with the buffer passing samples through: shards 0 and 1
  // (14 samples) are 3 whole batches before shard 2 is needed.
  EXPECT_EQ(batches, 3);
}

}  // namespace
}  // namespace ringloader
