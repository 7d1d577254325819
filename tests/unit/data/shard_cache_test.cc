// SPDX-License-Identifier: BSD-3-Clause
// The shard cache: one fetch per shard however many threads and cache
// objects (processes share it the same way: flock on a file), failures
// retried then reported with the exit status and stderr, cut-short copies
// never used, LRU eviction under a small limit, prefetch ahead of an order.
#include <gtest/gtest.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "loader/data/fetch/shard_cache.h"
#include "loader/data/fetch/shard_prefetcher.h"
#include "loader/data/tar/tar_index.h"
#include "loader/data/tar/tar_member_reader.h"
#include "loader/data/tar/tar_writer.h"
#include "ringloader/errors.h"
#include "tests/unit/temp_dir_test.h"

namespace ringloader::data {
namespace {

class ShardCacheTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    options_.dir = dir_ + "/cache";
    options_.retry_backoff_s = 0.01;
  }
  // A shard of `count` samples (~2-3 KB of image bytes each).
  std::string make_shard(const std::string& name, int count) {
    std::string path = dir_ + "/" + name;
    TarWriter writer(path);
    for (int n = 0; n < count; ++n) {
      char key[16];
      std::snprintf(key, sizeof(key), "%06d", n);
      std::string image = name + std::to_string(n) + std::string(2000 + n * 97, 'x');
      std::string label = std::to_string(n % 3);
      writer.add(std::string(key) + ".jpg", image.data(), image.size());
      writer.add(std::string(key) + ".cls", label.data(), label.size());
    }
    writer.close();
    return path;
  }
  // pipe: URL that appends a line to `counter` at each run, then cats.
  std::string counting(const std::string& shard, const std::string& counter) {
    return "pipe:echo run >> '" + counter + "'; cat '" + shard + "'";
  }
  static int lines(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) ++n;
    return n;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static uint64_t size_of(const std::string& path) {
    struct stat info {};
    return stat(path.c_str(), &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
  }
  // Files in the cache folder ending with `suffix`.
  int count_files(const std::string& suffix) {
    int n = 0;
    DIR* dir = opendir(options_.dir.c_str());
    if (!dir) return 0;
    while (dirent* entry = readdir(dir)) {
      std::string name = entry->d_name;
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        ++n;
      }
    }
    closedir(dir);
    return n;
  }
  std::string error_of(ShardCache& cache, const std::string& url, uint64_t expected = 0) {
    try {
      cache.open(url, expected);
    } catch (const IoError& error) {
      return error.what();
    }
    return "(no error)";
  }
  ShardCacheOptions options_;
};

TEST_F(ShardCacheTest, OneFetchForManyThreadsAndCaches) {
  const std::string shard = make_shard("a.tar", 5);
  const std::string counter = dir_ + "/count";
  // A slow command, so the readers really overlap its fetch.
  const std::string url = "pipe:echo run >> '" + counter + "'; sleep 0.3; cat '" + shard + "'";
  ShardCache first(options_), second(options_);  // two "processes"
  std::vector<std::thread> readers;
  std::vector<std::string> bytes(6);
  for (int i = 0; i < 6; ++i) {
    readers.emplace_back([&, i] {
      auto input = (i % 2 ? first : second).open(url, 0);
      bytes[i].resize(input->size());
      input->read_at(0, reinterpret_cast<uint8_t*>(bytes[i].data()), bytes[i].size());
    });
  }
  for (auto& reader : readers) reader.join();
  EXPECT_EQ(lines(counter), 1);
  EXPECT_EQ(first.fetches() + second.fetches(), 1);
  for (const std::string& copy : bytes) EXPECT_EQ(copy, read(shard));
  EXPECT_EQ(count_files(".shard"), 1);
  EXPECT_EQ(count_files(".part"), 0);
}

TEST_F(ShardCacheTest, FailingCommandIsRetriedThenNamedWithStatusAndStderr) {
  const std::string counter = dir_ + "/count";
  const std::string url = "pipe:echo run >> '" + counter +
                          "'; echo 'bucket not found' >&2; exit 7";
  ShardCache cache(options_);
  std::string error = error_of(cache, url);
  EXPECT_EQ(lines(counter), options_.fetch_attempts);
  EXPECT_NE(error.find(url), std::string::npos) << error;
  EXPECT_NE(error.find("status 7"), std::string::npos) << error;
  EXPECT_NE(error.find("bucket not found"), std::string::npos) << error;
  EXPECT_NE(error.find("3 attempts"), std::string::npos) << error;
  EXPECT_EQ(count_files(".shard"), 0);
  EXPECT_EQ(count_files(".part"), 0);
}

TEST_F(ShardCacheTest, FlakyCommandSucceedsOnRetry) {
  const std::string shard = make_shard("a.tar", 3);
  const std::string counter = dir_ + "/count";
  // Fails the first time only.
  const std::string url = "pipe:echo run >> '" + counter + "'; [ $(wc -l < '" + counter +
                          "') -ge 2 ] || exit 1; cat '" + shard + "'";
  ShardCache cache(options_);
  auto input = cache.open(url, 0);
  EXPECT_EQ(input->size(), size_of(shard));
  EXPECT_EQ(lines(counter), 2);
}

TEST_F(ShardCacheTest, CutShortCopiesAreNeverUsed) {
  const std::string shard = make_shard("a.tar", 4);
  ShardCache cache(options_);
  // Cut inside a member, and exactly after the first member (no end block).
  for (const std::string& cut : {std::string("1500"), std::string("2560")}) {
    std::string url = "pipe:head -c " + cut + " '" + shard + "'";
    std::string error = error_of(cache, url);
    EXPECT_NE(error.find(url), std::string::npos) << error;
    EXPECT_NE(error.find("truncated") == std::string::npos
                  ? error.find("cut short") : error.find("truncated"),
              std::string::npos) << error;
  }
  // A whole tar, but not the size the index knows.
  std::string url = "pipe:cat '" + shard + "'";
  std::string error = error_of(cache, url, size_of(shard) + 512);
  EXPECT_NE(error.find("cut short or changed"), std::string::npos) << error;
  EXPECT_EQ(count_files(".shard"), 0);
  EXPECT_EQ(count_files(".part"), 0);
}

TEST_F(ShardCacheTest, EvictsTheLeastRecentlyUsedBeyondTheLimit) {
  std::vector<std::string> urls;
  for (int i = 0; i < 4; ++i) {
    urls.push_back("pipe:cat '" + make_shard("s" + std::to_string(i) + ".tar", 4) + "'");
  }
  const uint64_t shard_bytes = size_of(dir_ + "/s0.tar");
  options_.limit_bytes = shard_bytes * 5 / 2;  // room for two
  ShardCache cache(options_);
  cache.open(urls[0], 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.open(urls[1], 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.open(urls[0], 0);  // used again: now s1 is the oldest
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.open(urls[2], 0);
  EXPECT_EQ(count_files(".shard"), 2);
  EXPECT_EQ(cache.fetches(), 3);
  cache.open(urls[0], 0);  // still there: no fetch
  EXPECT_EQ(cache.fetches(), 3);
  cache.open(urls[1], 0);  // evicted: fetched again
  EXPECT_EQ(cache.fetches(), 4);
  EXPECT_LE(count_files(".shard") * shard_bytes, options_.limit_bytes);
}

TEST_F(ShardCacheTest, IndexFetchesThroughTheCacheAndReadersUseTheCopy) {
  const std::string counter = dir_ + "/count";
  std::vector<std::string> urls;
  for (int i = 0; i < 3; ++i) {
    urls.push_back(counting(make_shard("s" + std::to_string(i) + ".tar", 4), counter));
  }
  TarIndex index = index_tar_shards(urls, 0, options_);
  EXPECT_EQ(lines(counter), 3);  // indexing is the one fetch
  EXPECT_EQ(index.shard_bytes[1], size_of(dir_ + "/s1.tar"));
  TarIndex shipped = TarIndex::from_json(index.to_json());  // what workers get
  EXPECT_EQ(shipped.cache.dir, options_.dir);
  EXPECT_EQ(shipped.shard_bytes, index.shard_bytes);
  TarMemberReader reader(shipped), other(shipped);
  TarIndex plain = index_tar_shards(urls, 0);  // no cache: streams each again
  TarMemberReader direct(plain);
  for (int64_t i = static_cast<int64_t>(shipped.size()) - 1; i >= 0; --i) {
    std::vector<uint8_t> a, b, c;
    reader.read(i, a);
    other.read(i, b);
    direct.read(i, c);
    EXPECT_EQ(a, c) << "sample " << i;
    EXPECT_EQ(b, c) << "sample " << i;
  }
  EXPECT_EQ(reader.pipe_commands(), 0);
  EXPECT_EQ(reader.shard_cache()->fetches(), 0);
  EXPECT_GE(direct.pipe_commands(), 3);
}

TEST_F(ShardCacheTest, PrefetcherRunsAheadOfTheOrder) {
  const std::string counter = dir_ + "/count";
  std::vector<std::string> urls;
  for (int i = 0; i < 5; ++i) {
    urls.push_back(counting(make_shard("s" + std::to_string(i) + ".tar", 4), counter));
  }
  TarIndex index = index_tar_shards(urls, 0);  // no cache at indexing
  const int indexing_runs = lines(counter);
  index.cache = options_;
  index.cache.prefetch_shards = 2;
  // Shards in the order 3, 1, 4, 0, 2 (4 samples each).
  std::vector<int64_t> order;
  for (int shard : {3, 1, 4, 0, 2}) {
    for (int k = 0; k < 4; ++k) order.push_back(shard * 4 + k);
  }
  ShardPrefetcher prefetcher(index);
  prefetcher.start(order, 0);
  prefetcher.wait_idle();
  EXPECT_EQ(prefetcher.fetches(), 3);  // the current shard and two ahead
  for (int shard : {3, 1, 4}) {
    EXPECT_GE(size_of(options_.dir + "/" + ShardCache::name_for(urls[shard]) + ".shard"), 1u);
  }
  EXPECT_EQ(size_of(options_.dir + "/" + ShardCache::name_for(urls[0]) + ".shard"), 0u);
  prefetcher.advance(9);  // into shard 4: 0 and 2 come next
  prefetcher.wait_idle();
  EXPECT_EQ(prefetcher.fetches(), 5);
  EXPECT_EQ(lines(counter), indexing_runs + 5);
}

}  // namespace
}  // namespace ringloader::data
