// SPDX-License-Identifier: BSD-3-Clause
// Tar shard indexing (grouping by key, labels), the epoch order of sharded
// datasets (a seeded permutation with bounded locality), and reading members
// back by index from files and from pipe: commands.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "loader/data/tar/tar_index.h"
#include "tests/unit/data/tar_index_contents.h"
#include "loader/data/tar/tar_member_reader.h"
#include "loader/data/tar/tar_writer.h"
#include "loader/sampler/sampler.h"
#include "loader/sampler/shard_order.h"
#include "ringloader/errors.h"
#include "tests/unit/temp_dir_test.h"

namespace ringloader::data {
namespace {

class TarIndexTest : public TempDirTest {
 protected:
  // Shard `name` with samples first..first+count-1: <key>.jpg holds "img<n>"
  // padded to a varying size, <key>.cls holds n % 7.
  std::string make_shard(const std::string& name, int first, int count) {
    std::string path = dir_ + "/" + name;
    TarWriter writer(path);
    for (int n = first; n < first + count; ++n) {
      char key[16];
      std::snprintf(key, sizeof(key), "%06d", n);
      std::string image = "img" + std::to_string(n) + std::string(n * 37 % 900, 'x');
      std::string label = std::to_string(n % 7);
      writer.add(std::string(key) + ".jpg", image.data(), image.size());
      writer.add(std::string(key) + ".cls", label.data(), label.size());
    }
    writer.close();
    return path;
  }
  std::string index_error(const std::vector<std::string>& urls) {
    try {
      index_tar_shards(urls, 0);
    } catch (const Error& error) {
      return error.what();
    }
    return "(no error)";
  }
  static int64_t file_size(const std::string& path) {
    struct stat info {};
    return stat(path.c_str(), &info) == 0 ? info.st_size : -1;
  }
};

TEST_F(TarIndexTest, GroupsMembersByKeyAcrossPatternShards) {
  make_shard("s-00.tar", 0, 5);
  make_shard("s-01.tar", 5, 3);
  TarIndex index = index_tar_shards({dir_ + "/s-{00..01}.tar"}, 16);
  ASSERT_EQ(index.shards.size(), 2u);
  EXPECT_EQ(index.shard_sizes, (std::vector<int64_t>{5, 3}));
  ASSERT_EQ(static_cast<size_t>(index.size()), 8u);
  TarMemberReader reader(index);
  std::vector<uint8_t> bytes;
  for (int n = 0; n < 8; ++n) {
    EXPECT_EQ(index.sample(n).label, n % 7);
    EXPECT_EQ(index.sample(n).shard, n < 5 ? 0 : 1);
    reader.read(n, bytes);
    std::string text(bytes.begin(), bytes.end());
    EXPECT_EQ(text.substr(0, 3 + std::to_string(n).size()), "img" + std::to_string(n));
  }
  EXPECT_EQ(describe_tar_sample(index, 6),
            "sample 6 (" + dir_ + "/s-01.tar member 000006.jpg)");
  // The description survives the trip to workers.
  TarIndex copy = TarIndex::from_json(index.to_json());
  EXPECT_EQ(index_contents(copy), index_contents(index));
}

TEST_F(TarIndexTest, PipeShardsIndexAndReadLikeFiles) {
  make_shard("s.tar", 0, 40);
  TarIndex local = index_tar_shards({dir_ + "/s.tar"}, 0);
  TarIndex piped = index_tar_shards({"pipe:cat '" + dir_ + "/s.tar'"}, 0);
  ASSERT_EQ(static_cast<size_t>(piped.size()), 40u);
  TarMemberReader local_reader(local), pipe_reader(piped);
  TarMemberReader no_cache_reader(piped, /*pipe_cache_members=*/0);
  std::vector<uint8_t> expected, got, uncached;
  // Forward reads keep one command open; going back is served by the
  // look-back cache, or restarts the command when the cache is gone.
  for (int n : {0, 3, 4, 17, 39, 2, 18, 1}) {
    local_reader.read(n, expected);
    pipe_reader.read(n, got);
    no_cache_reader.read(n, uncached);
    EXPECT_EQ(got, expected) << n;
    EXPECT_EQ(uncached, expected) << n;
  }
  EXPECT_EQ(pipe_reader.pipe_restarts(), 0);
  EXPECT_EQ(no_cache_reader.pipe_restarts(), 2);  // for 2 and 1
}

TEST_F(TarIndexTest, PipeWorkerOfAShuffledEpochStreamsEachShardOnce) {
  // What one of two workers reads in a shuffled epoch: every other batch of
  // 16 from shard order + a 64-sample buffer over 12 shards of 50. The
  // look-back cache serves the buffer's reordering: one command per shard,
  // no restarts, no byte streamed twice.
  std::vector<std::string> urls;
  uint64_t total = 0;
  for (int s = 0; s < 12; ++s) {
    std::string name = "p-" + std::to_string(s) + ".tar";
    total += static_cast<uint64_t>(file_size(make_shard(name, s * 50, 50)));
    urls.push_back("pipe:cat '" + dir_ + "/" + name + "'");
  }
  TarIndex index = index_tar_shards(urls, 64);
  std::vector<int64_t> order;
  sampler::shard_shuffle_order(index.shard_sizes, 64, 1, 0, order);
  TarMemberReader reader(index);
  std::vector<uint8_t> bytes;
  for (size_t batch = 0; batch * 16 < order.size(); batch += 2) {
    for (size_t i = batch * 16; i < std::min(order.size(), batch * 16 + 16); ++i) {
      reader.read(order[i], bytes);
    }
  }
  EXPECT_EQ(reader.pipe_restarts(), 0);
  EXPECT_EQ(reader.pipe_commands(), 12);
  EXPECT_LE(reader.pipe_bytes_streamed(), total);
}

TEST_F(TarIndexTest, ShardShrunkAfterIndexingNamesShardAndMember) {
  std::string path = make_shard("s.tar", 0, 10);
  TarIndex index = index_tar_shards({path}, 0);
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(index.sample(8).offset + 2)), 0);
  TarMemberReader reader(index);
  std::vector<uint8_t> bytes;
  try {
    reader.read(8, bytes);
    FAIL() << "no error";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find(path + " is truncated in member '000008.jpg'"),
              std::string::npos) << error.what();
  }
}

TEST_F(TarIndexTest, BadSamplesAreNamed) {
  {
    TarWriter writer(dir_ + "/nolabel.tar");
    writer.add("a.jpg", "x", 1);
    writer.add("a.cls", "cat", 3);
    writer.close();
  }
  std::string error = index_error({dir_ + "/nolabel.tar"});
  EXPECT_NE(error.find("member 'a.cls' should hold an integer"), std::string::npos) << error;
  {
    TarWriter writer(dir_ + "/noimage.tar");
    writer.add("a.txt", "x", 1);
    writer.add("a.cls", "1", 1);
    writer.close();
  }
  error = index_error({dir_ + "/noimage.tar"});
  EXPECT_NE(error.find("sample 'a' has no image member"), std::string::npos) << error;
  EXPECT_NE(index_error({dir_ + "/missing-{0..1}.tar"}).find("missing-0.tar"),
            std::string::npos);
}

TEST_F(TarIndexTest, ImageWithoutClsGetsMinusOne) {
  TarWriter writer(dir_ + "/s.tar");
  writer.add("a.PNG", "x", 1);
  writer.add("b.jpeg", "y", 1);
  writer.add("b.json", "{}", 2);
  writer.close();
  TarIndex index = index_tar_shards({dir_ + "/s.tar"}, 0);
  ASSERT_EQ(static_cast<size_t>(index.size()), 2u);
  EXPECT_EQ(index.sample(0).label, -1);
  EXPECT_EQ(index.sample(1).image_name, "b.jpeg");
}

std::vector<int64_t> order_of(const std::vector<int64_t>& sizes, int64_t buffer,
                              uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> out;
  sampler::shard_shuffle_order(sizes, buffer, seed, epoch, out);
  return out;
}

TEST(ShardOrderTest, PermutationThatDependsOnlyOnSeedAndEpoch) {
  const std::vector<int64_t> sizes = {10, 3, 0, 25, 7};
  auto order = order_of(sizes, 8, 5, 1);
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(45);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_EQ(order, order_of(sizes, 8, 5, 1));
  EXPECT_NE(order, order_of(sizes, 8, 5, 2));
  EXPECT_NE(order, order_of(sizes, 8, 6, 1));
}

TEST(ShardOrderTest, NoBufferKeepsShardsContiguousAndInArchiveOrder) {
  const std::vector<int64_t> sizes = {4, 4, 4, 4};
  auto order = order_of(sizes, 0, 3, 0);
  for (size_t i = 0; i < order.size(); i += 4) {
    for (size_t j = 1; j < 4; ++j) EXPECT_EQ(order[i + j], order[i] + int64_t(j));
    EXPECT_EQ(order[i] % 4, 0);
  }
  std::set<std::vector<int64_t>> shard_orders;
  for (uint64_t epoch = 0; epoch < 8; ++epoch) shard_orders.insert(order_of(sizes, 0, 3, epoch));
  EXPECT_GT(shard_orders.size(), 1u);  // shard order changes with the epoch
}

TEST(ShardOrderTest, BufferShufflesWithinAFewShardsAtATime) {
  // 20 shards of 50: a full permutation puts ~20 shards in every window of
  // 64 samples; the shard order + a 64-sample buffer touches a handful.
  const std::vector<int64_t> sizes(20, 50);
  auto mean_shards_per_window = [](const std::vector<int64_t>& order) {
    double total = 0;
    int windows = 0;
    for (size_t p = 0; p + 64 <= order.size(); p += 64, ++windows) {
      std::set<int64_t> shards;
      for (size_t i = p; i < p + 64; ++i) shards.insert(order[i] / 50);
      total += static_cast<double>(shards.size());
    }
    return total / windows;
  };
  auto order = order_of(sizes, 64, 11, 4);
  int64_t displaced = 0;
  for (size_t p = 0; p < order.size(); ++p) displaced += order[p] != static_cast<int64_t>(p);
  EXPECT_GT(displaced, 900);  // actually shuffled
  EXPECT_LT(mean_shards_per_window(order), 8.0);
  EXPECT_GT(mean_shards_per_window(sampler::shuffled_indices(1000, 11, 4)), 15.0);
}

TEST(ShardOrderTest, SamplerUsesShardOrderForShardedDatasets) {
  sampler::SamplerOptions options;
  options.dataset_size = 12;
  options.batch_size = 4;
  options.shuffle = true;
  options.seed = 9;
  options.shard_sizes = {6, 6};
  options.shuffle_buffer = 3;
  sampler::Sampler sampler(options);
  EXPECT_EQ(sampler.order(2), order_of({6, 6}, 3, 9, 2));
  options.shuffle = false;
  std::vector<int64_t> natural(12);
  std::iota(natural.begin(), natural.end(), 0);
  EXPECT_EQ(sampler::Sampler(options).order(2), natural);
}

TEST(ShardOrderTest, RanksTakeContiguousStretchesCoveringEverything) {
  sampler::SamplerOptions options;
  options.dataset_size = 100;  // 10 shards of 10, 3 ranks -> 34 each, 2 padded
  options.batch_size = 5;
  options.shuffle = true;
  options.seed = 4;
  options.shard_sizes = std::vector<int64_t>(10, 10);
  options.shuffle_buffer = 0;
  options.world_size = 3;
  std::vector<int64_t> all;
  const auto global = order_of(options.shard_sizes, 0, 4, 1);
  for (int64_t rank = 0; rank < 3; ++rank) {
    options.rank = rank;
    auto order = sampler::Sampler(options).order(1);
    ASSERT_EQ(order.size(), 34u);
    EXPECT_EQ(order[0], global[static_cast<size_t>(rank * 34)]);
    std::set<int64_t> shards;
    for (int64_t s : order) shards.insert(s / 10);
    EXPECT_LE(shards.size(), 5u) << rank;  // not all ten
    all.insert(all.end(), order.begin(), order.end());
  }
  std::set<int64_t> covered(all.begin(), all.end());
  EXPECT_EQ(covered.size(), 100u);
  EXPECT_EQ(all.size(), 102u);
}

}  // namespace
}  // namespace ringloader::data
