// SPDX-License-Identifier: BSD-3-Clause
// Indexing several shards at once (TarShardOptions::index_streams): the same
// table as one at a time, whatever order the shards finish in; the error of
// the lowest failing shard; pipe: commands that really run side by side.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "loader/data/tar/shard_counter.h"
#include "loader/data/tar/tar_index.h"
#include "loader/data/tar/tar_writer.h"
#include "ringloader/errors.h"
#include "tests/unit/temp_dir_test.h"
#include "tests/unit/data/tar_index_contents.h"

namespace ringloader::data {
namespace {

class TarIndexStreamsTest : public TempDirTest {
 protected:
  // Shard `number` holds (number * 5) % 9 + 1 samples, so shards differ in
  // size and finish out of order.
  std::string make_shard(int number) {
    char name[32];
    std::snprintf(name, sizeof(name), "/s-%02d.tar", number);
    TarWriter writer(dir_ + name);
    for (int n = 0; n < (number * 5) % 9 + 1; ++n) {
      const std::string key = std::to_string(number) + "-" + std::to_string(n);
      const std::string image = "img" + key + std::string((number * 131 + n * 37) % 3000, 'x');
      const std::string label = std::to_string((number + n) % 11);
      writer.add(key + ".jpg", image.data(), image.size());
      writer.add(key + ".cls", label.data(), label.size());
    }
    writer.close();
    return dir_ + name;
  }
  // Each shard behind a command that waits `delay` seconds longer the lower
  // the shard (so higher shards finish first), logging its start and the
  // end of its wait (the reader stops the command once it has the archive's
  // end, so nothing after `cat` runs for sure).
  std::vector<std::string> pipe_urls(int shards, double delay) {
    std::vector<std::string> urls;
    for (int s = 0; s < shards; ++s) {
      const std::string path = make_shard(s);
      urls.push_back("pipe:echo start >> " + dir_ + "/log; sleep " +
                     std::to_string(delay * (shards - s)) + "; echo end >> " + dir_ +
                     "/log; cat " + path);
    }
    return urls;
  }
  std::vector<std::string> log() const {
    std::ifstream in(dir_ + "/log");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
};

TEST_F(TarIndexStreamsTest, SameTableAndSizesAsOneAtATime) {
  for (int s = 0; s < 23; ++s) make_shard(s);
  const std::vector<std::string> urls = {dir_ + "/s-{00..22}.tar"};
  std::vector<uint64_t> one_sizes, eight_sizes;
  const TarIndex one = index_tar_shards(urls, 10, {}, &one_sizes, 1);
  const TarIndex eight = index_tar_shards(urls, 10, {}, &eight_sizes, 8);
  EXPECT_EQ(index_contents(one), index_contents(eight));
  EXPECT_EQ(one.table->digest(), eight.table->digest());
  EXPECT_EQ(one_sizes, eight_sizes);
  ASSERT_EQ(one_sizes.size(), 23u);
}

TEST_F(TarIndexStreamsTest, PipeShardsFinishingOutOfOrderKeepShardOrder) {
  const std::vector<std::string> urls = pipe_urls(6, 0.05);
  const TarIndex streamed = index_tar_shards(urls, 0, {}, nullptr, 6);
  std::vector<std::string> local;
  for (int s = 0; s < 6; ++s) local.push_back(dir_ + "/s-0" + std::to_string(s) + ".tar");
  nlohmann::json want = index_contents(index_tar_shards(local, 0, {}, nullptr, 1));
  nlohmann::json got = index_contents(streamed);
  // The same samples at the same offsets; only the shards' names differ.
  EXPECT_EQ(got["samples"], want["samples"]);
  EXPECT_EQ(got["shard_sizes"], want["shard_sizes"]);
  // Every command started before the first ended: they ran side by side.
  const std::vector<std::string> lines = log();
  ASSERT_EQ(lines.size(), 12u);
  EXPECT_EQ(std::vector<std::string>(lines.begin(), lines.begin() + 6),
            std::vector<std::string>(6, "start"));
}

TEST_F(TarIndexStreamsTest, OneStreamRunsCommandsOneAtATime) {
  index_tar_shards(pipe_urls(3, 0.01), 0, {}, nullptr, 1);
  EXPECT_EQ(log(), (std::vector<std::string>{"start", "end", "start", "end", "start", "end"}));
}

TEST_F(TarIndexStreamsTest, TheLowestFailingShardIsTheErrorWhateverFinishesFirst) {
  std::vector<std::string> urls;
  for (int s = 0; s < 12; ++s) urls.push_back(make_shard(s));
  // Shard 9 fails at once; shard 4 only after a while, when 9 has failed.
  urls[9] = "pipe:echo not a tar";
  urls[4] = "pipe:sleep 0.3; head -c 700 " + urls[4];
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      index_tar_shards(urls, 0, {}, nullptr, 8);
      FAIL() << "no error";
    } catch (const IoError& error) {
      EXPECT_NE(std::string(error.what()).find("head -c 700"), std::string::npos)
          << error.what();
    }
  }
}

TEST_F(TarIndexStreamsTest, StreamsBelowOneAreRefused) {
  make_shard(0);
  EXPECT_THROW(index_tar_shards({dir_ + "/s-00.tar"}, 0, {}, nullptr, 0), OptionError);
}

// In the background (ShardCounter): a shard's count is there once that
// shard is indexed, whatever the others do; prefer() starts shards in the
// order a first epoch visits them.
TEST_F(TarIndexStreamsTest, AShardIsCountedBeforeTheOthersEnd) {
  std::vector<std::string> urls;
  for (int s = 0; s < 4; ++s) urls.push_back(make_shard(s));
  const std::string gate = dir_ + "/gate";
  for (int s : {0, 1, 3}) {
    urls[s] = "pipe:while [ ! -e " + gate + " ]; do sleep 0.02; done; cat " + urls[s];
  }
  urls[2] = "pipe:cat " + urls[2];
  // Shards 0 and 1 may have started before prefer(): a third stream is
  // left for shard 2 either way.
  ShardCounter counter(tar_shard_list(urls, 0), false, 3);
  counter.prefer({2, 0});
  EXPECT_EQ(counter.wait_for(2), (2 * 5) % 9 + 1);
  EXPECT_FALSE(counter.counted(0).has_value());
  EXPECT_FALSE(counter.complete());
  std::ofstream(gate) << "open";
  EXPECT_EQ(counter.wait_for(3), (3 * 5) % 9 + 1);
  EXPECT_EQ(counter.index()->shard_sizes, (std::vector<int64_t>{1, 6, 2, 7}));
  EXPECT_TRUE(counter.complete());
  EXPECT_EQ(counter.index()->size(), 16);
}

TEST_F(TarIndexStreamsTest, AFailedShardIsItsWaitersErrorAndNeverComplete) {
  std::vector<std::string> urls;
  for (int s = 0; s < 3; ++s) urls.push_back(make_shard(s));
  urls[1] = "pipe:echo not a tar";
  ShardCounter counter(tar_shard_list(urls, 0), false, 1);
  EXPECT_EQ(counter.wait_for(0), 1);
  EXPECT_THROW(counter.wait_for(1), IoError);
  EXPECT_THROW(counter.wait_for(2), IoError);  // never started: 1's error
  EXPECT_FALSE(counter.complete());
  EXPECT_THROW(counter.index(), IoError);
  EXPECT_THROW(counter.index(), IoError);  // every caller
}

}  // namespace
}  // namespace ringloader::data
