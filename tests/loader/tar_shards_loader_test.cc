// SPDX-License-Identifier: BSD-3-Clause
// A Loader over tar shards made by ringloader-shard from an ImageFolder the
// test writes: same bytes for any worker count, for pipe: shards, and as the
// same images read as an ImageFolder in the same order; bad shards fail
// naming the shard and the member.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <thread>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

Pipeline augmenting_pipeline() {
  return Pipeline{RandomResizedCrop(16), RandomHorizontalFlip(), ToTensor()};
}

struct EpochRun {
  std::vector<torch::Tensor> data, targets;
  std::vector<std::vector<int64_t>> indices;
};

EpochRun run(const Dataset& dataset, int workers, int epochs,
        const std::vector<int64_t>& order = {},
        const Pipeline& pipeline = augmenting_pipeline()) {
  LoaderOptions options;
  options.batch_size = 4;
  options.num_workers = workers;
  options.shuffle = order.empty();
  options.seed = 77;
  Loader loader(dataset, pipeline, options);
  EpochRun out;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    loader.set_epoch(epoch);
    if (!order.empty()) loader.set_order(order);
    for (Batch& batch : loader) {
      out.data.push_back(batch.data.clone());
      out.targets.push_back(batch.target.clone());
      out.indices.push_back(batch.sample_indices);
    }
  }
  return out;
}

void expect_same(const EpochRun& a, const EpochRun& b, const std::string& what) {
  ASSERT_EQ(a.data.size(), b.data.size()) << what;
  for (size_t i = 0; i < a.data.size(); ++i) {
    EXPECT_TRUE(torch::equal(a.data[i], b.data[i])) << what << ": batch " << i;
    EXPECT_TRUE(torch::equal(a.targets[i], b.targets[i])) << what << ": batch " << i;
    EXPECT_EQ(a.indices[i], b.indices[i]) << what << ": batch " << i;
  }
}

class TarShardsLoader : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "images", 3, 10, "jpg");
    std::string command = "'" + testing::sibling_executable("ringloader-shard") + "' '" + (dir_ / "images") + "' '" +
                          (dir_ / "shards") + "/train-%04d.tar' --max-count 7 > /dev/null";
    ASSERT_EQ(std::system(("mkdir -p '" + (dir_ / "shards") + "'").c_str()), 0);
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    pattern_ = dir_ / "shards/train-{0000..0004}.tar";
  }
  testing::TempDir dir_;
  std::string pattern_;
};

TEST_F(TarShardsLoader, ShardsHoldTheFolderInOrder) {
  Dataset shards = Dataset::tar_shards({pattern_});
  Dataset folder = Dataset::image_folder(dir_ / "images");
  ASSERT_EQ(shards.size(), 30);
  EXPECT_EQ(shards.shard_sizes(), (std::vector<int64_t>{7, 7, 7, 7, 2}));
  // The same explicit order over both: identical bytes and labels. (Not
  // under augmentation: a tar sample's random stream is keyed by its shard
  // and place there, a file's by its index.)
  std::vector<int64_t> order(30);
  std::iota(order.begin(), order.end(), 0);
  std::reverse(order.begin(), order.end());
  std::swap(order[3], order[20]);
  const Pipeline resize{Resize({16, 16}), ToTensor()};
  expect_same(run(shards, 2, 2, order, resize), run(folder, 2, 2, order, resize),
              "shards vs folder");
}

TEST_F(TarShardsLoader, SameBytesForZeroAndTwoWorkers) {
  Dataset shards = Dataset::tar_shards({pattern_}, TarShardOptions{5});
  EpochRun reference = run(shards, 0, 2);
  ASSERT_EQ(reference.data.size(), 2u * 8u);  // 30 / 4 -> 8 batches
  expect_same(reference, run(shards, 2, 2), "2 workers");
  // Each epoch is a permutation, and epochs differ.
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    for (int b = 0; b < 8; ++b) {
      const auto& batch = reference.indices[epoch * 8 + b];
      seen.insert(seen.end(), batch.begin(), batch.end());
    }
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 30u);
  }
  EXPECT_NE(reference.indices[0], reference.indices[8]);
}

TEST_F(TarShardsLoader, PipeShardsGiveTheSameBytes) {
  Dataset local = Dataset::tar_shards({pattern_});
  Dataset piped = Dataset::tar_shards({"pipe:cat '" + pattern_ + "'"});
  ASSERT_EQ(piped.size(), 30);
  expect_same(run(local, 2, 1), run(piped, 2, 1), "pipe:cat");
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// What Python's dataset[i] reads: the image file's bytes, local or piped
// (the pipe: reader streams to the member and checks its header).
TEST_F(TarShardsLoader, MemberBytesAreTheImageFilesBytes) {
  Dataset folder = Dataset::image_folder(dir_ / "images");
  Dataset local = Dataset::tar_shards({pattern_});
  Dataset piped = Dataset::tar_shards({"pipe:cat '" + pattern_ + "'"});
  for (int64_t i : {0, 6, 7, 29}) {
    const std::vector<uint8_t> expected = file_bytes(folder.sample_path(i));
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(local.tar_member_bytes(i), expected) << "sample " << i;
    EXPECT_EQ(piped.tar_member_bytes(i), expected) << "piped sample " << i;
  }
  EXPECT_THROW(local.tar_member_bytes(30), IoError);
  EXPECT_THROW(folder.tar_member_bytes(0), OptionError);
}

// A pipe: command streamed by a worker (private_cache off: with it, the
// trainer's indexer fetches most shards) must not inherit the ring (or any
// memfd of the loader): it would keep the ring allocated after its worker
// died. Each command lists its own descriptors before it streams its shard.
TEST_F(TarShardsLoader, PipeCommandsInheritNoLoaderDescriptor) {
  const std::string listings = dir_ / "fds";
  ASSERT_EQ(mkdir(listings.c_str(), 0700), 0);
  TarShardOptions streamed;
  streamed.private_cache = false;
  Dataset piped = Dataset::tar_shards(
      {"pipe:ls -l /proc/self/fd > '" + listings + "'/$$.txt; cat '" + pattern_ + "'"}, streamed);
  const int at_construction = static_cast<int>(
      std::distance(std::filesystem::directory_iterator(listings),
                    std::filesystem::directory_iterator()));
  run(piped, 2, 1);
  int in_workers = -at_construction;
  for (const auto& entry : std::filesystem::directory_iterator(listings)) {
    ++in_workers;
    std::ifstream file(entry.path());
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("memfd:ringloader"), std::string::npos) << text;
  }
  EXPECT_GE(in_workers, 5);  // every shard was read by a worker
}

TEST_F(TarShardsLoader, CorruptMemberNamesShardAndMember) {
  // A shard made by GNU tar whose second image is not a JPEG.
  std::string src = dir_ / "bad";
  std::string script =
      "mkdir -p '" + src + "' && cd '" + src + "' && cp '" + (dir_ / "images/class_0/000.jpg") +
      "' 000000.jpg && echo 0 > 000000.cls && head -c 300 /dev/urandom > 000001.jpg && "
      "echo 1 > 000001.cls && tar --format=gnu -cf ../bad.tar 000000.jpg 000000.cls "
      "000001.jpg 000001.cls";
  ASSERT_EQ(std::system(script.c_str()), 0);
  Dataset bad = Dataset::tar_shards({dir_ / "bad.tar"});
  LoaderOptions options;
  options.batch_size = 2;
  options.num_workers = 1;
  Loader loader(bad, augmenting_pipeline(), options);
  try {
    for (Batch& batch : loader) (void)batch;
    FAIL() << "no error";
  } catch (const DecodeError& error) {
    std::string text = error.what();
    EXPECT_NE(text.find("bad.tar member 000001.jpg"), std::string::npos) << text;
    EXPECT_NE(text.find("sample 1"), std::string::npos) << text;
  }
}

TEST_F(TarShardsLoader, CorruptMemberIsSkippedAndCountedWithOnErrorSkip) {
  std::string src = dir_ / "bad";
  std::string script =
      "mkdir -p '" + src + "' && cd '" + src + "' && for i in 0 1 2; do cp '" +
      (dir_ / "images/class_1/00") + "'$i.jpg 00000$i.jpg && echo 1 > 00000$i.cls; done && "
      "head -c 300 /dev/urandom > 000001.jpg && tar -cf ../bad.tar 00000*";
  ASSERT_EQ(std::system(script.c_str()), 0);
  Dataset bad = Dataset::tar_shards({dir_ / "bad.tar"});
  ASSERT_EQ(bad.size(), 3);
  LoaderOptions options;
  options.batch_size = 3;
  options.num_workers = 1;
  options.on_error = OnError::kSkip;
  Loader loader(bad, augmenting_pipeline(), options);
  int64_t samples = 0;
  for (Batch& batch : loader) samples += batch.data.size(0);
  EXPECT_EQ(samples, 3);
  EXPECT_EQ(loader.stats().skipped_samples, 1);
}

TEST_F(TarShardsLoader, TruncatedShardFailsAtConstructionNamingTheMember) {
  std::string shard = dir_ / "shards/train-0002.tar";
  ASSERT_EQ(truncate(shard.c_str(), 3000), 0);
  try {
    Dataset::tar_shards({pattern_});
    FAIL() << "no error";
  } catch (const IoError& error) {
    std::string text = error.what();
    EXPECT_NE(text.find("train-0002.tar is truncated"), std::string::npos) << text;
    EXPECT_NE(text.find("member '0000"), std::string::npos) << text;
  }
}

// --- Shard cache and autotuned workers ---

int count_lines(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

void remove_cached_copies(const std::string& cache_dir) {
  for (const auto& entry : std::filesystem::directory_iterator(cache_dir)) {
    if (entry.path().extension() == ".shard") std::filesystem::remove(entry.path());
  }
}

TEST_F(TarShardsLoader, CachedPipeShardsAreFetchedOncePerNode) {
  const std::string counter = dir_ / "runs";
  const std::string url = "pipe:echo run >> '" + counter + "'; cat '" + pattern_ + "'";
  Dataset local = Dataset::tar_shards({pattern_});
  EpochRun reference = run(local, 2, 2);
  // Without a cache: every worker streams the shards it reads, again each
  // epoch.
  TarShardOptions stream_options;
  stream_options.private_cache = false;
  Dataset streamed = Dataset::tar_shards({url}, stream_options);
  expect_same(run(streamed, 2, 2), reference, "streamed");
  const int streamed_runs = count_lines(counter);
  EXPECT_GT(streamed_runs, 5 + 5);
  // The default, a private cache: fetched once by the indexer (issue 46).
  std::filesystem::remove(counter);
  Dataset private_cached = Dataset::tar_shards({url});
  expect_same(run(private_cached, 2, 2), reference, "private cache");
  EXPECT_EQ(count_lines(counter), 5);
  // Cached: indexing fetches each shard once; workers read the copies.
  std::filesystem::remove(counter);
  TarShardOptions cached_options;
  cached_options.cache_dir = dir_ / "cache";
  Dataset cached = Dataset::tar_shards({url}, cached_options);
  EXPECT_EQ(count_lines(counter), 5);
  expect_same(run(cached, 2, 2), reference, "cached");
  EXPECT_EQ(count_lines(counter), 5);
  // Cold copies, two loaders (trainer + 2 workers each) at once on one
  // folder: each shard is fetched once more, by one of the six processes.
  remove_cached_copies(cached_options.cache_dir);
  EpochRun first, second;
  std::thread other([&] { first = run(cached, 2, 1); });
  second = run(cached, 2, 1);
  other.join();
  EXPECT_EQ(count_lines(counter), 10);
  EpochRun one_epoch = run(local, 2, 1);
  expect_same(first, one_epoch, "first loader");
  expect_same(second, one_epoch, "second loader");
}

TEST_F(TarShardsLoader, SmallCacheEvictsAndStillGivesTheSameBytes) {
  TarShardOptions options;
  options.cache_dir = dir_ / "cache";
  options.cache_local = true;  // local shards through the cache too
  uint64_t largest = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "shards")) {
    largest = std::max<uint64_t>(largest, entry.file_size());
  }
  options.cache_limit_bytes = largest * 2;
  Dataset cached = Dataset::tar_shards({pattern_}, options);
  expect_same(run(cached, 2, 2), run(Dataset::tar_shards({pattern_}), 2, 2), "evicting");
  uint64_t kept = 0;
  int copies = 0;
  for (const auto& entry : std::filesystem::directory_iterator(options.cache_dir)) {
    if (entry.path().extension() != ".shard") continue;
    kept += entry.file_size();
    ++copies;
  }
  EXPECT_GE(copies, 1);
  // A copy locked by another process during the last eviction pass (being
  // fetched or opened) may stay past the limit.
  EXPECT_LE(kept, options.cache_limit_bytes + largest);
}

TEST_F(TarShardsLoader, FailedFetchNamesShardStatusAndStderr) {
  // Succeeds once (indexing), then fails with a message on stderr.
  const std::string script = dir_ / "fetch.sh";
  testing::write_file(script, "n=$(cat '" + (dir_ / "n") + "' 2>/dev/null || echo 0)\n"
                              "echo $((n + 1)) > '" + (dir_ / "n") + "'\n"
                              "[ \"$n\" = 0 ] || { echo 'access denied' >&2; exit 9; }\n"
                              "cat '" + (dir_ / "shards/train-0004.tar") + "'\n");
  TarShardOptions options;
  options.cache_dir = dir_ / "cache";
  options.prefetch_shards = 0;
  Dataset cached = Dataset::tar_shards({"pipe:sh " + script}, options);
  remove_cached_copies(options.cache_dir);
  LoaderOptions loader_options;
  loader_options.batch_size = 2;
  loader_options.num_workers = 1;
  Loader loader(cached, augmenting_pipeline(), loader_options);
  try {
    loader.begin();
    FAIL() << "no error";
  } catch (const IoError& error) {
    std::string text = error.what();
    EXPECT_NE(text.find("pipe:sh " + script), std::string::npos) << text;
    EXPECT_NE(text.find("status 9"), std::string::npos) << text;
    EXPECT_NE(text.find("access denied"), std::string::npos) << text;
  }
  std::ifstream runs(dir_ / "n");
  int n = 0;
  runs >> n;
  EXPECT_EQ(n, 1 + 3);  // indexing, then fetch_attempts tries
}

TEST_F(TarShardsLoader, StateResumesWithOrWithoutTheCache) {
  TarShardOptions cached_options;
  cached_options.cache_dir = dir_ / "cache";
  Dataset cached = Dataset::tar_shards({"pipe:cat '" + pattern_ + "'"}, cached_options);
  Dataset plain = Dataset::tar_shards({"pipe:cat '" + pattern_ + "'"});
  LoaderOptions options;
  options.batch_size = 4;
  options.num_workers = 1;
  options.shuffle = true;
  Loader first(cached, augmenting_pipeline(), options);
  first.begin_epoch();
  first.next();
  first.next();
  LoaderState state = first.state_dict();
  Loader resumed(plain, augmenting_pipeline(), options);
  EXPECT_NO_THROW(resumed.load_state_dict(state));
}

TEST_F(TarShardsLoader, AMixOfCachedShardsReadsThroughTheCache) {
  const std::string counter = dir_ / "runs";
  TarShardOptions cached_options;
  cached_options.cache_dir = dir_ / "cache";
  Dataset a = Dataset::tar_shards(
      {"pipe:echo run >> '" + counter + "'; cat '" + (dir_ / "shards/train-{0000..0001}.tar'")},
      cached_options);
  Dataset b = Dataset::tar_shards(
      {"pipe:echo run >> '" + counter + "'; cat '" + (dir_ / "shards/train-{0002..0004}.tar'")},
      cached_options);
  EXPECT_EQ(count_lines(counter), 5);
  Dataset mix = Dataset::mix({{a, 0.5}, {b, 0.5}});
  nlohmann::json description = mix.to_json();  // what workers get
  ASSERT_TRUE(description.contains("cache"));
  EXPECT_EQ(description["cache"]["dir"], cached_options.cache_dir);
  EXPECT_EQ(description["shard_bytes"].size(), 5u);
  run(mix, 2, 2);
  EXPECT_EQ(count_lines(counter), 5);  // the workers read the copies
}

// A shard index (ringloader-shard --index-only) replaces the pass over the
// pipe: shards at construction; epochs, a mix and a resumed state are those
// of the index made by streaming.
TEST_F(TarShardsLoader, AShardIndexSkipsStreamingAndGivesTheSameEpochs) {
  const std::string counter = dir_ / "runs";
  const std::string urls_a = "pipe:echo run >> '" + counter + "'; cat '" +
                             (dir_ / "shards/train-{0000..0001}.tar'");
  const std::string urls_b = "pipe:echo run >> '" + counter + "'; cat '" +
                             (dir_ / "shards/train-{0002..0004}.tar'");
  for (const auto& [urls, name] : {std::pair{urls_a, "a.json"}, std::pair{urls_b, "b.json"}}) {
    std::string command = "'" + testing::sibling_executable("ringloader-shard") + "' --index-only '" + (dir_ / name) + "' \"" +
                          urls + "\" > /dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  ASSERT_EQ(count_lines(counter), 5);
  TarShardOptions with_a, with_b;
  with_a.index = dir_ / "a.json";
  with_b.index = dir_ / "b.json";
  Dataset a = Dataset::tar_shards({urls_a}, with_a);
  Dataset b = Dataset::tar_shards({urls_b}, with_b);
  EXPECT_EQ(count_lines(counter), 5);  // no shard read to build them
  Dataset streamed_a = Dataset::tar_shards({urls_a});
  EXPECT_EQ(a.shard_sizes(), streamed_a.shard_sizes());
  expect_same(run(a, 2, 2), run(streamed_a, 2, 2), "indexed vs streamed");
  Dataset mix = Dataset::mix({{a, 0.3}, {b, 0.7}});
  Dataset streamed_mix = Dataset::mix({{streamed_a, 0.3}, {Dataset::tar_shards({urls_b}), 0.7}});
  expect_same(run(mix, 2, 1), run(streamed_mix, 2, 1), "mix");
  // The index made by ringloader-shard beside its shards, local ones.
  TarShardOptions beside;
  beside.index = dir_ / "shards/train.json";
  Dataset local = Dataset::tar_shards({pattern_}, beside);
  LoaderOptions options;
  options.batch_size = 4;
  options.num_workers = 1;
  options.shuffle = true;
  Loader first(local, augmenting_pipeline(), options);
  first.begin_epoch();
  first.next();
  LoaderState state = first.state_dict();
  Loader resumed(Dataset::tar_shards({pattern_}), augmenting_pipeline(), options);
  EXPECT_NO_THROW(resumed.load_state_dict(state));
}

TEST_F(TarShardsLoader, AutoWorkersGiveTheSameBytesAsFixed) {
  Dataset shards = Dataset::tar_shards({pattern_}, TarShardOptions{5});
  LoaderOptions options;
  options.batch_size = 2;
  options.num_workers = LoaderOptions::kAutoWorkers;
  options.max_auto_workers = 2;
  options.shuffle = true;
  options.seed = 77;
  // Short windows and no idle-core condition: the second worker is added
  // a few batches in, mid-epoch, whatever else runs on the machine.
  setenv("RINGLOADER_AUTOTUNE_WINDOW_S", "0.002", 1);
  setenv("RINGLOADER_AUTOTUNE_MIN_IDLE_CORES", "0", 1);
  Loader loader(shards, augmenting_pipeline(), options);
  unsetenv("RINGLOADER_AUTOTUNE_WINDOW_S");
  unsetenv("RINGLOADER_AUTOTUNE_MIN_IDLE_CORES");
  EpochRun automatic;
  for (int epoch = 0; epoch < 4; ++epoch) {
    loader.set_epoch(epoch);
    for (Batch& batch : loader) {
      automatic.data.push_back(batch.data.clone());
      automatic.targets.push_back(batch.target.clone());
      automatic.indices.push_back(batch.sample_indices);
    }
  }
  options.num_workers = 2;
  Loader fixed(shards, augmenting_pipeline(), options);
  EpochRun reference;
  for (int epoch = 0; epoch < 4; ++epoch) {
    fixed.set_epoch(epoch);
    for (Batch& batch : fixed) {
      reference.data.push_back(batch.data.clone());
      reference.targets.push_back(batch.target.clone());
      reference.indices.push_back(batch.sample_indices);
    }
  }
  expect_same(automatic, reference, "auto vs 2 workers");
  LoaderStats stats = loader.stats();
  int added = 0, retired = 0;
  for (const std::string& decision : stats.autotune_decisions) {
    // A retirement also prints "a -> b samples/s", so it is told apart first.
    const bool retires = decision.find("back to") != std::string::npos;
    retired += retires;
    added += !retires && decision.find(" workers (") != std::string::npos;
  }
  EXPECT_EQ(added, 1);  // the trainer only copies: it stalls on 1 worker
  EXPECT_EQ(stats.workers, 1 + added - retired);
  EXPECT_EQ(stats.ring_slots, 4);  // 2 x 2 workers
}

}  // namespace
}  // namespace ringloader
