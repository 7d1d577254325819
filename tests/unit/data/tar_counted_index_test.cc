// SPDX-License-Identifier: BSD-3-Clause
// A counts-only shard index (a plain wids index: "nsamples" per shard, no
// member table): pipe: shards start at once, the worker finds sample k of
// a shard by streaming it, and gets what a full index would have given it.
// A count the shard does not match is a named "stale index", never other
// samples; what needs labels or places up front says how to write a full
// index.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "loader/data/fetch/shard_input.h"
#include "loader/data/tar/tar_member_reader.h"
#include "loader/data/tar/tar_sample_stream.h"
#include "ringloader/dataset.h"
#include "tests/unit/data/tar_shard_fixture.h"

namespace ringloader::data {
namespace {

using nlohmann::json;

class TarCountedIndexTest : public TarShardTest {
 protected:
  // A plain wids index of `urls` with these counts.
  std::string write_counts(const std::vector<std::string>& urls,
                           const std::vector<int64_t>& counts,
                           const std::string& name = "wids.json") {
    json shardlist = json::array();
    for (size_t s = 0; s < urls.size(); ++s) {
      shardlist.push_back({{"url", urls[s]}, {"nsamples", counts[s]}});
    }
    return write_json({{"__kind__", "wids-shard-index-v1"}, {"wids_version", 1},
                       {"shardlist", shardlist}}, name);
  }
  // Three shards of 5, 4 and 6 samples behind pipe: commands.
  std::vector<std::string> pipe_shards() {
    std::vector<std::string> urls;
    const int counts[] = {5, 4, 6};
    for (int s = 0, first = 0; s < 3; first += counts[s], ++s) {
      urls.push_back("pipe:cat " + make_shard("s-" + std::to_string(s) + ".tar", first,
                                              counts[s]));
    }
    return urls;
  }
  static std::string read_error(TarMemberReader& reader, int64_t sample) {
    std::vector<uint8_t> bytes;
    try {
      reader.read(sample, bytes);
    } catch (const IoError& error) {
      return error.what();
    }
    return "(no error)";
  }
};

TEST_F(TarCountedIndexTest, EverySampleIsTheOneAFullIndexReadsInAnyOrder) {
  const std::vector<std::string> urls = pipe_shards();
  const TarIndex full = index_tar_shards(urls, 0);
  const TarIndex counted = load_tar_manifest(write_counts(urls, {5, 4, 6}), urls, 0);
  ASSERT_TRUE(counted.has_unplaced);
  ASSERT_EQ(counted.shard_sizes, full.shard_sizes);
  EXPECT_FALSE(counted.sample(7).placed());
  // Forward, skipping ahead (look-back cache), then backwards (a restart).
  const std::vector<int64_t> order = {0, 3, 1, 2, 4, 9, 14, 5, 8, 6, 7, 10, 13, 12, 11, 0, 14};
  TarMemberReader full_reader(full);
  TarMemberReader counted_reader(counted, /*pipe_cache_members=*/4);
  for (int64_t sample : order) {
    std::vector<uint8_t> want, got;
    const int64_t want_label = full_reader.read(sample, want);
    const int64_t got_label = counted_reader.read(sample, got);
    EXPECT_EQ(got, want) << "sample " << sample;
    EXPECT_EQ(got_label, want_label) << "sample " << sample;
    EXPECT_EQ(got_label, sample % 7);
  }
  EXPECT_GE(counted_reader.pipe_restarts(), 2);
}

TEST_F(TarCountedIndexTest, ACountTheShardDoesNotMatchIsAStaleIndex) {
  const std::vector<std::string> urls = pipe_shards();
  const std::string path = write_counts(urls, {6, 3, 6});
  const TarIndex counted = load_tar_manifest(path, urls, 0);
  TarMemberReader reader(counted);
  // Shard 0 holds 5 samples, not 6: sample 5 is not there.
  EXPECT_EQ(read_error(reader, 5), "ringloader: shard " + urls[0] + ": stale index " + path +
                                       ": it counts 6 samples, the shard holds 5; write the "
                                       "index again");
  // Shard 1 holds 4, not 3: its last counted sample is followed by another.
  EXPECT_EQ(read_error(reader, 8), "ringloader: shard " + urls[1] + ": stale index " + path +
                                       ": it counts 3 samples, the shard holds more; write the "
                                       "index again");
  EXPECT_EQ(read_error(reader, 6), "(no error)");  // before the mismatch: the right sample
}

TEST_F(TarCountedIndexTest, LocalShardsAndTheShardCacheSayHowToWriteAFullIndex) {
  const std::string local = make_shard("s-0.tar", 0, 3);
  const std::string path = write_counts({local}, {3});
  const std::string how =
      "write ringloader's full index once with `ringloader-shard --index-only INDEX.json URL...`)";
  EXPECT_EQ(load_error(path, {local}),
            "OptionError: ringloader: shard index " + path +
                " holds sample counts only (a plain wids index), which serves pipe: shards "
                "streamed without a cache, but shard " + local +
                " is a local file (local shards are indexed from their headers in moments: "
                "leave out the index, or " + how);
  const std::string remote = "https://example.org/s-0.tar";
  const std::string web = write_counts({remote}, {3}, "web.json");
  EXPECT_EQ(load_error(web),
            "OptionError: ringloader: shard index " + web +
                " holds sample counts only (a plain wids index), which serves pipe: shards "
                "streamed without a cache, but shard " + remote + " is not a pipe: command "
                "(list it as one in the index, e.g. \"pipe:curl -sfL " + remote + "\", or " + how);
  const std::string piped = write_counts({"pipe:cat " + local}, {3}, "piped.json");
  ShardCacheOptions cache;
  cache.dir = dir_ + "/cache";
  try {
    load_tar_manifest(piped, {}, 0, cache);
    ADD_FAILURE() << "a counts-only index was read through a shard cache";
  } catch (const OptionError& error) {
    EXPECT_EQ(std::string(error.what()),
              "ringloader: shard index " + piped + " holds sample counts only (a plain wids "
              "index), which serves pipe: shards streamed without a cache, but its pipe: shards "
              "are read through the shard cache " + cache.dir + " (" + how);
  }
}

TEST_F(TarCountedIndexTest, ACountNoShardCouldHoldIsRefusedBeforeTheTableIsBuilt) {
  const std::string local = make_shard("s-0.tar", 0, 3);
  json wids = {{"__kind__", "wids-shard-index-v1"},
               {"shardlist", {{{"url", "pipe:cat " + local}, {"nsamples", 1000},
                               {"filesize", 10240}}}}};
  const std::string path = write_json(wids, "huge.json");
  EXPECT_EQ(load_error(path), "IoError: ringloader: shard index " + path +
                                  ": shard 0: \"nsamples\" 1000 is more than its filesize "
                                  "10240 holds");
  wids["shardlist"][0].erase("filesize");
  wids["shardlist"][0]["nsamples"] = int64_t{1} << 40;
  EXPECT_NE(load_error(write_json(wids, "huge.json")).find("is more than a shard holds"),
            std::string::npos);
}

TEST_F(TarCountedIndexTest, LabelsAndPlacesAskedForUpFrontSayHowToWriteAFullIndex) {
  const std::vector<std::string> urls = pipe_shards();
  TarShardOptions options;
  options.index = write_counts(urls, {5, 4, 6});
  const Dataset dataset = Dataset::tar_shards(urls, options);
  EXPECT_EQ(dataset.size(), 15);
  const std::string want = "ringloader: sample_label needs a full shard index: " +
                           options.index + " counts samples only (a plain wids index)";
  try {
    dataset.sample_label(3);
    ADD_FAILURE() << "a label the index does not hold was handed out";
  } catch (const OptionError& error) {
    EXPECT_EQ(std::string(error.what()).rfind(want, 0), 0u) << error.what();
  }
  EXPECT_THROW(dataset.sample_labels(), OptionError);
  EXPECT_THROW(dataset.tar_member(3), OptionError);
  // The bytes are still there, read as a worker reads them.
  const std::vector<uint8_t> bytes = dataset.tar_member_bytes(6);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 4), "img6");
  // And a worker's copy of the description knows its samples are unplaced.
  const Dataset copy = Dataset::from_json(dataset.to_json());
  EXPECT_THROW(copy.sample_labels(), OptionError);
}

// The worker's stream groups as the indexer does: labels before images,
// other members, a second image; a sample without an image is named.
TEST_F(TarCountedIndexTest, TheStreamGroupsMembersAsTheIndexerDoes) {
  const std::string path = dir_ + "/mixed.tar";
  {
    TarWriter writer(path);
    auto add = [&](const std::string& name, const std::string& data) {
      writer.add(name, data.data(), data.size());
    };
    add("a.cls", "3");
    add("a.jpg", "first");
    add("a.json", "{}");
    add("b.jpg", "second");
    add("b.seg.png", "mask");
    add("b.png", "other image");
    add("c.txt", "no image");
    writer.close();
  }
  TarSampleStream stream(std::make_unique<FileInput>(path), path, 4);
  GroupedSample sample;
  ASSERT_TRUE(stream.next(sample));
  EXPECT_EQ(sample.image, "first");
  EXPECT_EQ(sample.sample.label, 3);
  EXPECT_EQ(sample.sample.shard, 4);
  EXPECT_FALSE(stream.at_end());
  ASSERT_TRUE(stream.next(sample));
  EXPECT_EQ(sample.image, "second");
  EXPECT_EQ(sample.sample.label, -1);
  EXPECT_EQ(sample.sample.image_name, "b.jpg");
  EXPECT_EQ(stream.next_ordinal(), 2);
  try {
    stream.next(sample);
    ADD_FAILURE() << "a sample without an image was handed out";
  } catch (const IoError& error) {
    EXPECT_EQ(std::string(error.what()), "ringloader: shard " + path +
                                             ": sample 'c' has no image member (.jpg .jpeg "
                                             ".png .ppm .bmp .pgm .tif .tiff .webp)");
  }
}

}  // namespace
}  // namespace ringloader::data
