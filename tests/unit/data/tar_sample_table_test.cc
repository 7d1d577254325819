// SPDX-License-Identifier: BSD-3-Clause
// The shared tar sample table: a worker maps exactly the samples the trainer
// indexed, its description is O(1) in the dataset, and a table that is
// unsealed, of another version, cut short, or whose shard ids, offsets or
// name ranges point outside it is a named IoError, never another member.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "loader/data/tar/tar_index.h"
#include "loader/data/tar/tar_member_reader.h"
#include "loader/data/tables/tar_sample_table.h"
#include "loader/data/tar/tar_writer.h"
#include "ringloader/errors.h"
#include "tests/unit/data/sealed_memfd_test_support.h"
#include "tests/unit/data/tar_index_contents.h"

namespace ringloader::data {
namespace {

using memfd_test::bytes_of;
using memfd_test::memfd_with;

std::string open_error(const std::vector<uint8_t>& bytes, bool seal = true) {
  return memfd_test::open_error<TarSampleTable>(bytes, seal);
}

std::shared_ptr<const TarSampleTable> small_table() {
  TarSampleTableBuilder builder;
  builder.add({0, 512, 10, 3, "000000.jpg"});
  builder.add({0, 2048, 700, -1, "000001.png"});
  builder.add({1, 512, 5, 7, "a long/member name.jpeg"});
  return TarSampleTable::build(std::move(builder), 2);
}

// The column offsets the header implies (tar_sample_table.h's layout).
struct Layout {
  size_t offsets, sizes, labels, name_end, shard;
};

Layout layout_of(const std::vector<uint8_t>& bytes) {
  TarSampleTableHeader header;
  std::memcpy(&header, bytes.data(), sizeof header);
  const size_t n = header.count;
  const size_t base = sizeof header;
  return {base, base + 8 * n, base + 16 * n, base + 24 * n, base + 32 * n};
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const IoError& error) {
    return error.what();
  }
  return "";
}

TEST(TarSampleTable, ReopenedByPathReadsWhatWasBuilt) {
  auto table = small_table();
  auto copy = TarSampleTable::open(table->proc_path());
  ASSERT_EQ(copy->size(), 3);
  EXPECT_EQ(copy->shards(), 2u);
  const TarSample s = copy->sample(1);
  EXPECT_EQ(s.shard, 0);
  EXPECT_EQ(s.offset, 2048u);
  EXPECT_EQ(s.size, 700u);
  EXPECT_EQ(s.label, -1);
  EXPECT_EQ(s.image_name, "000001.png");
  EXPECT_EQ(copy->sample(2).image_name, "a long/member name.jpeg");
  EXPECT_EQ(copy->shard(2), 1);
  EXPECT_EQ(copy->labels()[2], 7);
  EXPECT_EQ(copy->digest(), table->digest());
  EXPECT_NE(error_of([&] { copy->sample(3); }).find("sample 3"), std::string::npos);
  EXPECT_THROW(copy->label(-1), IoError);
}

TEST(TarSampleTable, UnsealedOrTruncatedMemfdIsRefused) {
  auto table = small_table();
  const std::vector<uint8_t> bytes = bytes_of(*table);
  EXPECT_NE(open_error(bytes, false).find("sealed"), std::string::npos);
  EXPECT_EQ(open_error(bytes, true), "");
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 9);
  EXPECT_NE(open_error(cut).find("sizes do not match"), std::string::npos);
  std::vector<uint8_t> header_only(bytes.begin(), bytes.begin() + 20);
  EXPECT_NE(open_error(header_only).find("less than its header"), std::string::npos);
}

TEST(TarSampleTable, OtherMagicVersionOrCountsAreRefused) {
  const std::vector<uint8_t> bytes = bytes_of(*small_table());
  auto with = [&](auto edit) {
    std::vector<uint8_t> copy = bytes;
    TarSampleTableHeader header;
    std::memcpy(&header, copy.data(), sizeof header);
    edit(header);
    std::memcpy(copy.data(), &header, sizeof header);
    return open_error(copy);
  };
  EXPECT_NE(with([](TarSampleTableHeader& h) { h.magic ^= 1; }).find("magic"),
            std::string::npos);
  EXPECT_NE(with([](TarSampleTableHeader& h) { h.version = 9; }).find("version 9"),
            std::string::npos);
  EXPECT_NE(with([](TarSampleTableHeader& h) { h.count = uint64_t{1} << 60; }).find("sizes"),
            std::string::npos);
  EXPECT_NE(with([](TarSampleTableHeader& h) { h.count += 1; }).find("sizes"),
            std::string::npos);
  EXPECT_NE(with([](TarSampleTableHeader& h) { h.pool_bytes += 8; }).find("sizes"),
            std::string::npos);
  EXPECT_NE(with([](TarSampleTableHeader& h) { h.shards = uint64_t{1} << 40; }).find("sizes"),
            std::string::npos);
  // A sample table of file datasets is not a tar sample table.
  EXPECT_NE(open_error(std::vector<uint8_t>(64 + 8, 0)).find("magic"), std::string::npos);
}

TEST(TarSampleTable, CorruptColumnsAreNamedNotFollowed) {
  std::vector<uint8_t> bytes = bytes_of(*small_table());
  const Layout at = layout_of(bytes);
  // Sample 0's shard id is past the shard count; sample 1's name ends past
  // the pool; sample 2's offset + size overflows.
  const int32_t shard = 5;
  std::memcpy(bytes.data() + at.shard, &shard, 4);
  const uint64_t far = 1 << 20;
  std::memcpy(bytes.data() + at.name_end + 8, &far, 8);
  const uint64_t huge = UINT64_MAX - 2;
  std::memcpy(bytes.data() + at.offsets + 16, &huge, 8);
  int fd = -1;
  const std::string path = memfd_with(bytes, true, fd);
  auto corrupt = TarSampleTable::open(path);
  const std::string bad_shard = error_of([&] { corrupt->sample(0); });
  EXPECT_NE(bad_shard.find(path), std::string::npos) << bad_shard;
  EXPECT_NE(bad_shard.find("sample 0: shard 5 of 2"), std::string::npos) << bad_shard;
  const std::string bad_name = error_of([&] { corrupt->sample(1); });
  EXPECT_NE(bad_name.find("sample 1: name bytes"), std::string::npos) << bad_name;
  EXPECT_NE(bad_name.find("outside its pool"), std::string::npos) << bad_name;
  const std::string bad_offset = error_of([&] { corrupt->offset(2); });
  EXPECT_NE(bad_offset.find("sample 2: offset"), std::string::npos) << bad_offset;
  EXPECT_NE(bad_offset.find("corrupt"), std::string::npos) << bad_offset;
  close(fd);
}

TEST(TarSampleTable, MissingTableIsNamed) {
  const std::string error = error_of([] { TarSampleTable::open("/proc/self/fd/100000"); });
  EXPECT_NE(error.find("tar sample table /proc/self/fd/100000"), std::string::npos) << error;
}

class TarSampleTableIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ringloader-tartable-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Shard `name` with `count` samples, keys from `first` on.
  std::string make_shard(const std::string& name, int first, int count) {
    const std::string path = dir_ + "/" + name;
    TarWriter writer(path);
    for (int n = first; n < first + count; ++n) {
      char key[16];
      std::snprintf(key, sizeof key, "%06d", n);
      const std::string image = "img" + std::to_string(n) + std::string(n % 700, 'x');
      writer.add(std::string(key) + ".jpg", image.data(), image.size());
      const std::string label = std::to_string(n % 7);
      writer.add(std::string(key) + ".cls", label.data(), label.size());
    }
    writer.close();
    return path;
  }

  std::string dir_;
};

TEST_F(TarSampleTableIndex, WorkersMapTheTrainersTableAndReadTheSameMembers) {
  make_shard("s-0.tar", 0, 30);
  make_shard("s-1.tar", 30, 20);
  const TarIndex index = index_tar_shards({dir_ + "/s-{0..1}.tar"}, 8);
  const nlohmann::json description = index.to_json();
  // The description names the table; it does not carry the samples.
  EXPECT_FALSE(description.contains("names"));
  EXPECT_LT(description.dump().size(), 400u);
  const TarIndex worker = TarIndex::from_json(description);
  EXPECT_EQ(index_contents(worker), index_contents(index));
  EXPECT_EQ(worker.sample(35).label, 35 % 7);
  EXPECT_EQ(worker.sample(35).shard, 1);
  TarMemberReader reader(worker);
  std::vector<uint8_t> bytes;
  reader.read(35, bytes);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 5), "img35");
}

TEST_F(TarSampleTableIndex, ADescriptionThatDisagreesWithItsTableIsNamed) {
  make_shard("s-0.tar", 0, 6);
  make_shard("s-1.tar", 6, 4);
  const TarIndex index = index_tar_shards({dir_ + "/s-{0..1}.tar"}, 0);
  const nlohmann::json good = index.to_json();
  const std::string path = good["table"];
  auto error_with = [&](auto edit) {
    nlohmann::json copy = good;
    edit(copy);
    return error_of([&] { TarIndex::from_json(copy); });
  };
  EXPECT_EQ(error_with([](nlohmann::json&) {}), "");
  const std::string count = error_with([](nlohmann::json& d) { d["count"] = 11; });
  EXPECT_NE(count.find(path), std::string::npos) << count;
  EXPECT_NE(count.find("holds 10 samples"), std::string::npos) << count;
  EXPECT_NE(error_with([](nlohmann::json& d) { d["digest"] = "0000000000000000"; })
                .find("digest"), std::string::npos);
  const std::string sizes = error_with([](nlohmann::json& d) { d["shard_sizes"] = {5, 4}; });
  EXPECT_NE(sizes.find("summing to 9"), std::string::npos) << sizes;
  const std::string past = error_with([](nlohmann::json& d) { d["shard_sizes"] = {7, 4}; });
  EXPECT_NE(past.find("summing to more than 10"), std::string::npos) << past;
  const std::string shards =
      error_with([](nlohmann::json& d) { d["shards"].push_back("x.tar"); });
  EXPECT_NE(shards.find("samples of 2 shards"), std::string::npos) << shards;
}

TEST_F(TarSampleTableIndex, ASampleOutsideItsShardsRangeIsNamedNotRead) {
  make_shard("s-0.tar", 0, 3);
  make_shard("s-1.tar", 3, 3);
  const TarIndex index = index_tar_shards({dir_ + "/s-{0..1}.tar"}, 0);
  // The same samples, but sample 1 names shard 1 (whose member at that
  // offset is another sample): the reader must refuse it.
  std::vector<uint8_t> bytes = bytes_of(*index.table);
  const int32_t shard = 1;
  std::memcpy(bytes.data() + layout_of(bytes).shard + 4, &shard, 4);
  int fd = -1;
  TarIndex worker = index;
  worker.table = TarSampleTable::open(memfd_with(bytes, true, fd));
  TarMemberReader reader(worker);
  std::vector<uint8_t> out;
  reader.read(0, out);
  const std::string error = error_of([&] { reader.read(1, out); });
  EXPECT_NE(error.find("sample 1 names shard 1"), std::string::npos) << error;
  close(fd);
}

}  // namespace
}  // namespace ringloader::data
