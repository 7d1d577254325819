// SPDX-License-Identifier: BSD-3-Clause
// The shared sample table: what the trainer builds a worker reads back
// exactly, the description that reaches a worker is O(1) in the dataset,
// and a table that is unsealed, of another version, or whose offsets point
// outside it is a named IoError, never a wrong path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "loader/data/tables/sample_table.h"
#include "ringloader/dataset.h"
#include "ringloader/errors.h"
#include "tests/unit/data/sealed_memfd_test_support.h"

namespace ringloader::data {
namespace {

std::shared_ptr<const SampleTable> small_table() {
  SampleTableBuilder builder;
  builder.add_class("cat");
  builder.add_class("dog");
  builder.add_path("/data/cat/1.jpg", 0);
  builder.add_path("/data/cat/2.jpg", 0);
  builder.add_path("/data/dog/x y.png", 1);
  builder.add_path("relative.png", 7);
  return SampleTable::build(std::move(builder));
}

using memfd_test::bytes_of;
using memfd_test::memfd_with;

std::string open_error(const std::vector<uint8_t>& bytes, bool seal = true) {
  return memfd_test::open_error<SampleTable>(bytes, seal);
}

TEST(SampleTable, ReopenedByPathReadsWhatWasBuilt) {
  auto table = small_table();
  auto copy = SampleTable::open(table->proc_path());
  ASSERT_EQ(copy->size(), 4);
  EXPECT_EQ(copy->path(0), "/data/cat/1.jpg");
  EXPECT_EQ(copy->path(1), "/data/cat/2.jpg");
  EXPECT_EQ(copy->path(2), "/data/dog/x y.png");
  EXPECT_EQ(copy->path(3), "relative.png");
  EXPECT_EQ(copy->label(2), 1);
  EXPECT_EQ(copy->label(3), 7);
  EXPECT_EQ(copy->classes(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(copy->digest(), table->digest());
  EXPECT_EQ(copy->labels()[1], 0);
}

TEST(SampleTable, IndexOutsideIsNamed) {
  auto table = small_table();
  try {
    table->path(4);
    FAIL();
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("sample 4"), std::string::npos);
  }
  EXPECT_THROW(table->label(-1), IoError);
}

TEST(SampleTable, UnsealedMemfdIsRefused) {
  auto table = small_table();
  EXPECT_NE(open_error(bytes_of(*table), false).find("sealed"), std::string::npos);
  EXPECT_EQ(open_error(bytes_of(*table), true), "");
}

TEST(SampleTable, OtherVersionOrMagicOrSizeIsRefused) {
  auto table = small_table();
  std::vector<uint8_t> bytes = bytes_of(*table);
  auto with = [&](auto edit) {
    std::vector<uint8_t> copy = bytes;
    SampleTableHeader header;
    std::memcpy(&header, copy.data(), sizeof header);
    edit(header);
    std::memcpy(copy.data(), &header, sizeof header);
    return open_error(copy);
  };
  EXPECT_NE(with([](SampleTableHeader& h) { h.version = 2; }).find("version 2"),
            std::string::npos);
  EXPECT_NE(with([](SampleTableHeader& h) { h.magic ^= 1; }).find("magic"), std::string::npos);
  EXPECT_NE(with([](SampleTableHeader& h) { h.count = uint64_t{1} << 61; }).find("sizes"),
            std::string::npos);
  EXPECT_NE(with([](SampleTableHeader& h) { h.pool_bytes += 1; }).find("sizes"),
            std::string::npos);
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + 10);
  EXPECT_NE(open_error(cut).find("less than its header"), std::string::npos);
}

TEST(SampleTable, CorruptOffsetsAreNamedNotFollowed) {
  auto table = small_table();
  std::vector<uint8_t> bytes = bytes_of(*table);
  SampleTableHeader header;
  std::memcpy(&header, bytes.data(), sizeof header);
  const size_t labels = sizeof header;
  const size_t folders = labels + header.count * 8;
  const size_t name_end = folders + ((header.count * 4 + 7) & ~size_t{7});
  // Sample 1's name ends past the pool; sample 2's folder does not exist.
  uint64_t far = header.pool_bytes + 100;
  std::memcpy(bytes.data() + name_end + 8, &far, 8);
  uint32_t folder = 999;
  std::memcpy(bytes.data() + folders + 8, &folder, 4);
  int fd = -1;
  auto corrupt = SampleTable::open(memfd_with(bytes, true, fd));
  EXPECT_EQ(corrupt->path(0), "/data/cat/1.jpg");
  try {
    corrupt->path(1);
    FAIL();
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("sample 1"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("corrupt"), std::string::npos);
  }
  try {
    corrupt->path(2);
    FAIL();
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("folder 999"), std::string::npos);
  }
  close(fd);
}

TEST(SampleTable, MissingTableIsNamed) {
  try {
    SampleTable::open("/proc/self/fd/100000");
    FAIL();
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("/proc/self/fd/100000"), std::string::npos);
  }
}

TEST(SampleTable, DescriptionSizeIsIndependentOfTheDataset) {
  std::vector<FileSample> few{{"/d/a/1.jpg", 0}};
  std::vector<FileSample> many;
  for (int i = 0; i < 50000; ++i) many.push_back({"/d/a/" + std::to_string(i) + ".jpg", i % 3});
  const Dataset small = Dataset::file_list(few);
  const Dataset large = Dataset::file_list(many);
  const std::string text = large.to_json().dump();
  EXPECT_LT(text.size(), 256u);
  EXPECT_LT(text.size(), small.to_json().dump().size() + 16);
  // A worker rebuilds the dataset from that description alone.
  const Dataset copy = Dataset::from_json(nlohmann::json::parse(text));
  ASSERT_EQ(copy.size(), 50000);
  EXPECT_EQ(copy.sample_path(12345), "/d/a/12345.jpg");
  EXPECT_EQ(copy.sample_label(12345), 12345 % 3);
  EXPECT_THROW(copy.sample_path(50000), IoError);
}

TEST(SampleTable, SelectAndMixKeepOrderAndLabels) {
  const Dataset a = Dataset::file_list({{"/a/0.jpg", 0}, {"/a/1.jpg", 1}, {"/a/2.jpg", 2}});
  const Dataset picked = a.select({2, 0});
  ASSERT_EQ(picked.size(), 2);
  EXPECT_EQ(picked.sample_path(0), "/a/2.jpg");
  EXPECT_EQ(picked.sample_label(1), 0);
  EXPECT_THROW(a.select({3}), OptionError);
  const Dataset mixed = Dataset::mix({{a, 1.0}, {picked, 1.0}});
  ASSERT_EQ(mixed.size(), 5);
  EXPECT_EQ(mixed.sample_path(3), "/a/2.jpg");
  EXPECT_EQ(mixed.files().back().path, "/a/0.jpg");
}

}  // namespace
}  // namespace ringloader::data
