// SPDX-License-Identifier: BSD-3-Clause
// Distributed sharding: ranks get disjoint shards of one permutation per
// (seed, epoch), padded like torch's DistributedSampler, equal batch counts.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <map>
#include <set>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

using Distributed = testing::FolderTest<3, 10>;  // 30 samples

struct RankRun {
  int64_t batches = 0;
  std::vector<int64_t> samples;                 // in delivery order
  std::map<int64_t, torch::Tensor> sample_data; // dataset index -> pixels
};

RankRun run_rank(const Dataset& dataset, int rank, int world, int workers,
                 bool shuffle, int64_t epoch) {
  LoaderOptions options;
  options.batch_size = 4;
  options.num_workers = workers;
  options.shuffle = shuffle;
  options.seed = 77;
  options.rank = rank;
  options.world_size = world;
  Loader loader(dataset,
                Pipeline{RandomResizedCrop(8), RandomHorizontalFlip(), ToTensor()},
                options);
  loader.set_epoch(epoch);
  RankRun run;
  for (Batch& batch : loader) {
    ++run.batches;
    for (size_t i = 0; i < batch.sample_indices.size(); ++i) {
      run.samples.push_back(batch.sample_indices[i]);
      run.sample_data[batch.sample_indices[i]] = batch.data[i].clone();
    }
  }
  EXPECT_EQ(run.batches, loader.size());
  return run;
}

// World sizes 1, 2, 3 over 30 samples: 30, 15 and 10 per rank, no padding
// needed for 1, 2, 3; world 4 pads 30 to 32 (two samples seen twice).
TEST_F(Distributed, RanksAreDisjointCompleteAndEqual) {
  for (int world : {1, 2, 3, 4}) {
    std::vector<RankRun> runs;
    for (int rank = 0; rank < world; ++rank) {
      runs.push_back(run_rank(dataset_, rank, world, rank % 2, true, 3));
    }
    const int64_t per_rank = (30 + world - 1) / world;
    std::multiset<int64_t> all;
    for (const RankRun& run : runs) {
      EXPECT_EQ(run.batches, runs[0].batches) << "world " << world;
      EXPECT_EQ(static_cast<int64_t>(run.samples.size()), per_rank);
      all.insert(run.samples.begin(), run.samples.end());
    }
    std::set<int64_t> unique(all.begin(), all.end());
    EXPECT_EQ(unique.size(), 30u) << "world " << world << ": every sample once";
    EXPECT_EQ(static_cast<int64_t>(all.size()) - 30, per_rank * world - 30)
        << "only the documented padding repeats";
    // One shared permutation: rank r's i-th sample is position i*world + r.
    const std::vector<int64_t>& single = run_rank(dataset_, 0, 1, 0, true, 3).samples;
    for (int rank = 0; rank < world; ++rank) {
      for (size_t i = 0; i < runs[rank].samples.size(); ++i) {
        EXPECT_EQ(runs[rank].samples[i], single[(i * world + rank) % 30]);
      }
    }
  }
}

TEST_F(Distributed, SampleBytesDoNotDependOnTheRank) {
  RankRun whole = run_rank(dataset_, 0, 1, 0, true, 1);
  for (int rank = 0; rank < 3; ++rank) {
    RankRun shard = run_rank(dataset_, rank, 3, 1, true, 1);
    for (const auto& [index, data] : shard.sample_data) {
      EXPECT_TRUE(torch::equal(data, whole.sample_data.at(index))) << index;
    }
  }
}

TEST_F(Distributed, SequentialShardsMatchDistributedSamplerWithoutShuffle) {
  // torch: indices 0..n-1, padded by wrapping, then indices[rank::world].
  RankRun rank1 = run_rank(dataset_, 1, 4, 0, false, 0);
  std::vector<int64_t> expected;
  for (int64_t i = 1; i < 32; i += 4) expected.push_back(i % 30);
  EXPECT_EQ(rank1.samples, expected);
  EXPECT_EQ(epoch_order(30, [] {
              LoaderOptions o;
              o.rank = 1;
              o.world_size = 4;
              return o;
            }(), 0),
            expected);
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) old_ = old;
    had_ = old != nullptr;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST_F(Distributed, RankAndWorldSizeComeFromTheEnvironment) {
  ScopedEnv rank("RANK", "2"), world("WORLD_SIZE", "3");
  Loader loader(dataset_, Pipeline{CenterCrop(8)}, options(4, 0));
  EXPECT_EQ(loader.options().rank, 2);
  EXPECT_EQ(loader.options().world_size, 3);
  EXPECT_EQ(loader.size(), 3);  // 10 samples of 30
  EXPECT_EQ((*loader.begin()).sample_indices, (std::vector<int64_t>{2, 5, 8, 11}));

  LoaderOptions explicit_options = options(4, 0);
  explicit_options.rank = 0;
  explicit_options.world_size = 1;
  Loader whole(dataset_, Pipeline{CenterCrop(8)}, explicit_options);
  EXPECT_EQ(whole.size(), 8) << "explicit options win over the environment";
}

TEST_F(Distributed, BadRanksAreOptionErrors) {
  LoaderOptions opts = options(4, 0);
  opts.rank = 3;
  opts.world_size = 3;
  EXPECT_THROW(Loader(dataset_, Pipeline{CenterCrop(8)}, opts), OptionError);
  opts.rank = -2;
  EXPECT_THROW(Loader(dataset_, Pipeline{CenterCrop(8)}, opts), OptionError);
  opts.rank = 0;
  opts.world_size = 0;
  EXPECT_THROW(Loader(dataset_, Pipeline{CenterCrop(8)}, opts), OptionError);
  {
    ScopedEnv bad("RANK", "one");
    EXPECT_THROW(Loader(dataset_, Pipeline{CenterCrop(8)}, options(4, 0)), OptionError);
  }
  {
    ScopedEnv rank("RANK", "4"), world("WORLD_SIZE", "4");
    try {
      Loader loader(dataset_, Pipeline{CenterCrop(8)}, options(4, 0));
      ADD_FAILURE() << "rank 4 of 4 accepted";
    } catch (const OptionError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 4"), std::string::npos) << e.what();
    }
  }
}

TEST_F(Distributed, CudaMeansTheLocalRanksGpu) {
  ScopedEnv local("LOCAL_RANK", "1");
  LoaderOptions opts = options(4, 0);
  opts.device = "cuda";
  try {
    Loader loader(dataset_, Pipeline{CenterCrop(8), ToTensor()}, opts);
    EXPECT_EQ(loader.options().device, "cuda:1");  // a machine with 2+ GPUs
  } catch (const OptionError& e) {
    // No GPU, a CPU libtorch, or a single GPU: refused, naming the device.
    EXPECT_NE(std::string(e.what()).find("cuda:1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringloader
