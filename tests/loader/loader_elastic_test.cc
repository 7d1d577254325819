// SPDX-License-Identifier: BSD-3-Clause
// Elastic resume and weighted mixing through the public Loader: states saved
// by the ranks of one world size restore into another; Dataset::mix draws
// its parts by weight, deterministically, resumably and sharded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

constexpr int64_t kBatch = 2;

LoaderOptions rank_options(int rank, int world) {
  LoaderOptions out;
  out.batch_size = kBatch;
  out.shuffle = true;
  out.seed = 3;
  out.rank = rank;
  out.world_size = world;
  out.intra_op_threads = 1;
  return out;
}

Pipeline tiny() { return Pipeline{CenterCrop(4), ToTensor()}; }

std::vector<std::vector<int64_t>> take(Loader& loader, int64_t epoch, int64_t limit) {
  std::vector<std::vector<int64_t>> batches;
  loader.set_epoch(epoch);
  loader.begin_epoch();
  while (static_cast<int64_t>(batches.size()) < limit) {
    auto batch = loader.next();
    if (!batch) break;
    batches.push_back(batch->sample_indices);
  }
  return batches;
}

LoaderState through_json(const LoaderState& state) {
  return LoaderState::from_json(nlohmann::json::parse(state.to_json().dump()));
}

class Elastic : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "images", 1, 23, "jpg", 8, 12);
    folder_ = Dataset::image_folder(dir_ / "images");
    ASSERT_EQ(std::system(("mkdir -p '" + (dir_ / "shards") + "'").c_str()), 0);
    const std::string command = "'" + testing::sibling_executable("ringloader-shard") + "' '" + (dir_ / "images") + "' '" +
                                (dir_ / "shards") + "/s-%04d.tar' --max-count 8 > /dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    tars_ = Dataset::tar_shards({dir_ / "shards/s-{0000..0002}.tar"}, TarShardOptions{3});
  }

  // Runs `stop` batches per rank at `before`, resumes at `after` (with the
  // list of states, or rank 0's alone) and checks the epoch's coverage and
  // that epoch 1 is `after`'s own.
  void transition(const Dataset& dataset, int before, int after, int64_t stop,
                  bool single) {
    SCOPED_TRACE(std::to_string(before) + " -> " + std::to_string(after));
    std::map<int64_t, int> seen;
    std::vector<LoaderState> states;
    for (int r = 0; r < before; ++r) {
      Loader loader(dataset, tiny(), rank_options(r, before));
      for (auto& batch : take(loader, 0, stop)) {
        for (int64_t i : batch) ++seen[i];
      }
      states.push_back(through_json(loader.state_dict()));
    }
    std::set<size_t> counts;
    for (int r = 0; r < after; ++r) {
      Loader loader(dataset, tiny(), rank_options(r, after));
      if (single) {
        loader.load_state_dict(states[0]);
      } else {
        loader.load_state_dict(states);
      }
      auto rest = take(loader, 0, 1000);
      counts.insert(rest.size());
      for (auto& batch : rest) {
        for (int64_t i : batch) ++seen[i];
      }
      Loader fresh(dataset, tiny(), rank_options(r, after));
      EXPECT_EQ(take(loader, 1, 1000), take(fresh, 1, 1000)) << "rank " << r;
    }
    EXPECT_EQ(counts.size(), 1u) << "unequal batch counts";
    EXPECT_EQ(static_cast<int64_t>(seen.size()), dataset.size());
    int repeats = 0;
    for (auto& [sample, n] : seen) repeats += n - 1;
    EXPECT_LE(repeats, (before - 1) + (after - 1)) << "more than padding repeated";
  }

  testing::TempDir dir_;
  Dataset folder_, tars_;
};

TEST_F(Elastic, FolderStatesRestoreIntoOtherWorldSizes) {
  transition(folder_, 4, 3, 1, false);
  transition(folder_, 2, 4, 2, true);
  transition(folder_, 3, 1, 2, false);
}

TEST_F(Elastic, TarShardStatesRestoreIntoOtherWorldSizes) {
  transition(tars_, 4, 3, 1, false);
  transition(tars_, 2, 4, 2, true);
  transition(tars_, 3, 1, 2, false);
}

TEST_F(Elastic, TwoResumesInOneEpochKeepTheHistory) {
  std::map<int64_t, int> seen;
  std::vector<LoaderState> first;
  for (int r = 0; r < 4; ++r) {
    Loader loader(folder_, tiny(), rank_options(r, 4));
    for (auto& batch : take(loader, 0, 1)) for (int64_t i : batch) ++seen[i];
    first.push_back(loader.state_dict());
  }
  std::vector<LoaderState> second;
  for (int r = 0; r < 3; ++r) {
    Loader loader(folder_, tiny(), rank_options(r, 3));
    loader.load_state_dict(first);
    for (auto& batch : take(loader, 0, 1)) for (int64_t i : batch) ++seen[i];
    second.push_back(through_json(loader.state_dict()));
    EXPECT_EQ(second.back().elastic.size(), 1u);
  }
  for (int r = 0; r < 2; ++r) {
    Loader loader(folder_, tiny(), rank_options(r, 2));
    loader.load_state_dict(second);
    for (auto& batch : take(loader, 0, 1000)) for (int64_t i : batch) ++seen[i];
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), folder_.size());
  int repeats = 0;
  for (auto& [sample, n] : seen) repeats += n - 1;
  EXPECT_LE(repeats, 3 + 2 + 1);
}

TEST_F(Elastic, DisagreeingStatesAndCallerOrdersAreRefused) {
  std::vector<LoaderState> states;
  for (int r = 0; r < 2; ++r) {
    Loader loader(folder_, tiny(), rank_options(r, 2));
    take(loader, 0, 1 + r);
    states.push_back(loader.state_dict());
  }
  states[1].epoch = 1;
  EXPECT_THROW(LoaderState::merge(states), OptionError);
  EXPECT_THROW(LoaderState::merge({states[0]}), OptionError);  // rank 1 missing
  EXPECT_THROW(LoaderState::merge({states[0], states[0]}), OptionError);

  LoaderOptions custom = rank_options(0, 2);
  Loader ordered(folder_, tiny(), custom);
  ordered.set_order({5, 4, 3, 2});
  take(ordered, 0, 1);
  Loader elsewhere(folder_, tiny(), rank_options(0, 3));
  try {
    elsewhere.load_state_dict(ordered.state_dict());
    ADD_FAILURE() << "a caller's order moved to another world size";
  } catch (const OptionError& e) {
    EXPECT_NE(std::string(e.what()).find("set_order"), std::string::npos) << e.what();
  }
}

TEST_F(Elastic, TarMixesNativelyAndFoldersDoNotMixWithTars) {
  // Two tar parts (the same shards twice): 1:3 of an epoch of 40.
  Dataset mixed = Dataset::mix({{tars_, 1.0}, {tars_, 3.0}}, MixOptions{40});
  ASSERT_EQ(mixed.size(), 46);
  std::map<int, int64_t> per_part;
  for (int r = 0; r < 2; ++r) {
    Loader loader(mixed, tiny(), rank_options(r, 2));
    for (auto& batch : take(loader, 0, 1000)) {
      for (int64_t i : batch) ++per_part[i < 23 ? 0 : 1];
    }
  }
  EXPECT_EQ(per_part[0], 10);
  EXPECT_EQ(per_part[1], 30);
  try {
    Dataset::mix({{folder_, 1.0}, {tars_, 1.0}});
    ADD_FAILURE() << "mixed a folder with tar shards natively";
  } catch (const OptionError& e) {
    EXPECT_NE(std::string(e.what()).find("another kind"), std::string::npos) << e.what();
  }
}

class Mixing : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "a", 1, 10, "png", 8, 10);
    testing::make_image_folder(dir_ / "b", 1, 30, "png", 8, 10);
  }
  Dataset mix(int64_t epoch_size) {
    return Dataset::mix({{Dataset::image_folder(dir_ / "a"), 0.7},
                         {Dataset::image_folder(dir_ / "b"), 0.3}},
                        MixOptions{epoch_size});
  }
  testing::TempDir dir_;
};

TEST_F(Mixing, EpochsDrawTheWeightsExactlyAndDeterministically) {
  Dataset mixed = mix(0);  // Mosaic's default: 40 samples, 28 from a
  ASSERT_EQ(mixed.size(), 40);
  LoaderOptions options = rank_options(0, 1);
  Loader loader(mixed, tiny(), options);
  EXPECT_EQ(loader.size(), 20);
  std::vector<std::vector<int64_t>> epochs[2];
  for (int e = 0; e < 2; ++e) {
    auto batches = take(loader, e, 1000);
    int64_t from_a = 0, total = 0;
    for (auto& batch : batches) {
      for (int64_t i : batch) {
        from_a += i < 10;
        ++total;
      }
    }
    EXPECT_EQ(total, 40);
    EXPECT_EQ(from_a, 28) << "0.7 of 40";
    epochs[e] = batches;
  }
  EXPECT_NE(epochs[0], epochs[1]);
  Loader again(mixed, tiny(), options);
  EXPECT_EQ(take(again, 1, 1000), epochs[1]);
  // Resume mid-epoch: the rest is the same.
  Loader stopped(mixed, tiny(), options);
  take(stopped, 1, 5);
  Loader resumed(mixed, tiny(), options);
  resumed.load_state_dict(through_json(stopped.state_dict()));
  auto rest = take(resumed, 1, 1000);
  EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(epochs[1].begin() + 5, epochs[1].end()));
}

TEST_F(Mixing, RanksShareOneDrawAndBadWeightsAreRefused) {
  Dataset mixed = mix(100);
  std::map<int64_t, int> drawn;
  std::set<int64_t> counts;
  for (int r = 0; r < 3; ++r) {
    Loader loader(mixed, tiny(), rank_options(r, 3));
    auto batches = take(loader, 0, 1000);
    counts.insert(static_cast<int64_t>(batches.size()));
    for (auto& batch : batches) for (int64_t i : batch) ++drawn[i < 10 ? 0 : 1];
  }
  EXPECT_EQ(counts.size(), 1u);
  EXPECT_EQ(drawn[0] + drawn[1], 102);  // 100 padded to 3 x 34
  EXPECT_NEAR(drawn[0], 70, 2);
  EXPECT_THROW(Dataset::mix({{Dataset::image_folder(dir_ / "a"), -1.0}}), OptionError);
}

}  // namespace
}  // namespace ringloader
