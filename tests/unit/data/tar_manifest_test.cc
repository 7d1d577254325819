// SPDX-License-Identifier: BSD-3-Clause
// The shard index file (loader/data/tar/tar_manifest): it rebuilds the index
// that reading the shards gives, and a corrupt, foreign or stale one is a
// named error at construction or in the worker, never other samples.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "loader/data/tar/tar_index.h"
#include "tests/unit/data/tar_index_contents.h"
#include "loader/data/tar/tar_manifest.h"
#include "loader/data/tar/tar_member_reader.h"
#include "ringloader/errors.h"
#include "tests/unit/data/tar_shard_fixture.h"

namespace ringloader::data {
namespace {

using nlohmann::json;

class TarManifestTest : public TarShardTest {};

// The index without its "manifest" key: what reading the shards gives.
json without_manifest(const TarIndex& index) { return index_contents(index); }

TEST_F(TarManifestTest, RebuildsTheIndexReadingGivesForFilesAndPipes) {
  make_shard("s-0.tar", 0, 5);
  make_shard("s-1.tar", 5, 3);
  const std::string files = dir_ + "/s-{0..1}.tar";
  const std::string pipes = "pipe:cat " + dir_ + "/s-{0..1}.tar";
  for (const std::string& urls : {files, pipes}) {
    TarIndex read = index_tar_shards({urls}, 16);
    std::string manifest = write_manifest({urls});
    TarIndex loaded = load_tar_manifest(manifest, {urls}, 16);
    EXPECT_EQ(without_manifest(loaded), index_contents(read)) << urls;
    EXPECT_EQ(loaded.manifest, manifest);
    // Workers get it through JSON, the manifest's name included.
    EXPECT_EQ(TarIndex::from_json(loaded.to_json()).manifest, manifest);
    // No URLs: the manifest's own list.
    EXPECT_EQ(load_tar_manifest(manifest, {}, 16).shards, read.shards);
    // The manifest itself may come from a command.
    EXPECT_EQ(without_manifest(load_tar_manifest("pipe:cat " + manifest, {urls}, 16)),
              index_contents(read));
  }
}

TEST_F(TarManifestTest, RelativeUrlsAreFoundFromTheManifestsFolder) {
  make_shard("s-0.tar", 0, 4);
  std::vector<uint64_t> sizes;
  TarIndex index = index_tar_shards({dir_ + "/s-0.tar"}, 0, {}, &sizes);
  std::string manifest = write_json(tar_manifest_json(index, {"s-0.tar"}, sizes));
  EXPECT_EQ(load_tar_manifest(manifest, {dir_ + "/s-0.tar"}, 0).size(), 4);
  EXPECT_EQ(load_tar_manifest(manifest, {}, 0).shards,
            (std::vector<std::string>{dir_ + "/s-0.tar"}));
  // wids's base_path moves them.
  json moved = read_json(manifest);
  moved["base_path"] = "elsewhere";
  EXPECT_EQ(load_tar_manifest(write_json(moved, "moved.json"), {}, 0).shards,
            (std::vector<std::string>{dir_ + "/elsewhere/s-0.tar"}));
}

TEST_F(TarManifestTest, CorruptManifestsAreNamedWithTheReason) {
  make_shard("s-0.tar", 0, 5);
  const std::string urls = dir_ + "/s-0.tar";
  const json good = read_json(write_manifest({urls}, "good.json"));
  struct Case {
    const char* what;
    std::function<void(json&)> change;
    const char* reason;
  };
  std::vector<Case> cases = {
      {"kind", [](json& m) { m["__kind__"] = "something-else"; }, "\"__kind__\" is not"},
      {"version", [](json& m) { m["ringloader_index"] = 99; }, "\"ringloader_index\" is 99"},
      {"count", [](json& m) { m["shardlist"][0]["nsamples"] = 6; },
       "\"nsamples\" is 6 but \"offsets\" holds 5"},
      {"short column", [](json& m) { m["shardlist"][0]["ringloader"]["names"].erase(0); },
       "\"names\" holds 4"},
      {"past filesize",
       [](json& m) { m["shardlist"][0]["ringloader"]["offsets"][4] = 1 << 20; },
       "is past its filesize"},
      {"backwards",
       [](json& m) { m["shardlist"][0]["ringloader"]["offsets"][2] = 512; },
       "is not after the previous member"},
      {"negative size", [](json& m) { m["shardlist"][0]["ringloader"]["sizes"][1] = -3; },
       "\"sizes\"[1] is not a non-negative integer"},
      {"label", [](json& m) { m["shardlist"][0]["ringloader"]["labels"][0] = "cat"; },
       "label 0 is not an integer"},
      {"url", [](json& m) { m["shardlist"][0].erase("url"); }, "no \"url\" string"},
      {"empty", [](json& m) { m["shardlist"] = json::array(); }, "the shard list is empty"},
  };
  for (const Case& c : cases) {
    json manifest = good;
    c.change(manifest);
    std::string path = write_json(manifest, "bad.json");
    std::string error = load_error(path, {urls});
    EXPECT_EQ(error.rfind("IoError: ringloader: shard index " + path + ": ", 0), 0u)
        << c.what << ": " << error;
    EXPECT_NE(error.find(c.reason), std::string::npos) << c.what << ": " << error;
  }
  std::string text = write_text("{\"__kind__\": \"wids-shard-index-v1\", \"shardl", "cut.json");
  EXPECT_EQ(load_error(text, {urls}),
            "IoError: ringloader: shard index " + text + ": not valid JSON");
  std::string missing = load_error(dir_ + "/missing.json", {urls});
  EXPECT_NE(missing.find("IoError: ringloader: cannot read shard index " + dir_ +
                         "/missing.json"), std::string::npos) << missing;
}

TEST_F(TarManifestTest, AManifestOfOtherShardsIsAnOptionError) {
  make_shard("s-0.tar", 0, 3);
  make_shard("s-1.tar", 3, 3);
  std::string manifest = write_manifest({dir_ + "/s-{0..1}.tar"});
  std::string error = load_error(manifest, {dir_ + "/s-1.tar", dir_ + "/s-0.tar"});
  EXPECT_EQ(error.rfind("OptionError: ringloader: shard index " + manifest +
                        " lists 2 shards, the URLs give 2; first difference at shard 0: '" +
                        dir_ + "/s-1.tar' given, '" + dir_ + "/s-0.tar' indexed", 0), 0u)
      << error;
  EXPECT_NE(load_error(manifest, {dir_ + "/s-0.tar"}).find("the URLs give 1"),
            std::string::npos);
}

TEST_F(TarManifestTest, ALocalShardOfAnotherSizeIsAStaleIndex) {
  make_shard("s-0.tar", 0, 4);
  std::string manifest = write_manifest({dir_ + "/s-0.tar"});
  make_shard("s-0.tar", 0, 5);  // rewritten after indexing
  std::string error = load_error(manifest, {dir_ + "/s-0.tar"});
  EXPECT_EQ(error.rfind("IoError: ringloader: shard " + dir_ + "/s-0.tar: stale index " +
                        manifest + ": the shard is ", 0), 0u) << error;
}

// A pipe: shard cannot be measured at construction: the worker checks the
// member header in front of each member it streams to.
TEST_F(TarManifestTest, APipeShardThatChangedFailsInTheWorkerNamingTheMember) {
  make_shard("s-0.tar", 0, 6);
  const std::string url = "pipe:cat " + dir_ + "/s-0.tar";
  std::string manifest = write_manifest({url});
  TarIndex index = load_tar_manifest(manifest, {url}, 0);
  // Same layout, other samples: keys 100.. instead of 0.. (names differ).
  make_shard("s-0.tar", 100, 6);
  TarMemberReader reader(index);
  std::vector<uint8_t> bytes;
  try {
    reader.read(2, bytes);
    FAIL() << "read other bytes: " << std::string(bytes.begin(), bytes.end()).substr(0, 8);
  } catch (const IoError& error) {
    std::string text = error.what();
    EXPECT_EQ(text.rfind("ringloader: shard " + url + ": stale index " + manifest +
                         ": member '000000.jpg' (", 0), 0u) << text;
    EXPECT_NE(text.find("the shard holds member '000100.jpg'"), std::string::npos) << text;
  }
  // Same names, other sizes: caught by the size.
  make_shard("s-0.tar", 0, 6, "other-bytes");
  TarMemberReader again(index);
  try {
    again.read(0, bytes);
    FAIL() << "read other bytes";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("stale index"), std::string::npos) << error.what();
  }
}

TEST_F(TarManifestTest, AShardThatIsStillTheSameReadsAsIndexed) {
  make_shard("s-0.tar", 0, 30);
  const std::string url = "pipe:cat " + dir_ + "/s-0.tar";
  TarIndex index = load_tar_manifest(write_manifest({url}), {url}, 0);
  TarIndex local = index_tar_shards({dir_ + "/s-0.tar"}, 0);
  TarMemberReader piped(index), files(local);
  std::vector<uint8_t> got, expected;
  for (int n : {0, 7, 3, 29, 1}) {
    piped.read(n, got);
    files.read(n, expected);
    EXPECT_EQ(got, expected) << n;
  }
}

}  // namespace
}  // namespace ringloader::data
