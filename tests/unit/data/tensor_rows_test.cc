// SPDX-License-Identifier: BSD-3-Clause
// Tensor rows (Dataset::tensor_rows): what the trainer writes a worker reads
// back row for row, and a file that is unsealed, of another version, of an
// unknown element type, or whose counts and offsets reach outside it is a
// named IoError at open, before any row is read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <numeric>

#include "loader/data/tables/tensor_rows.h"
#include "ringloader/dataset.h"
#include "ringloader/errors.h"
#include "tests/unit/data/sealed_memfd_test_support.h"

namespace ringloader::data {
namespace {

// 5 rows of 2 x 3 int16 (row i holds 100 * i + 0..5) and labels 10 * i.
struct Example {
  std::vector<int16_t> values;
  std::vector<int64_t> labels;
  TensorRowsData data() const {
    TensorRowsData out;
    out.rows = values.data();
    out.row_count = 5;
    out.type = ElementType::kInt16;
    out.row_shape = {2, 3};
    out.labels = labels.data();
    return out;
  }
};

Example example() {
  Example out;
  for (int row = 0; row < 5; ++row) {
    for (int k = 0; k < 6; ++k) out.values.push_back(static_cast<int16_t>(100 * row + k));
    out.labels.push_back(10 * row);
  }
  return out;
}

using memfd_test::bytes_of;
using memfd_test::memfd_with;

std::string open_error(const std::vector<uint8_t>& bytes, bool seal = true) {
  return memfd_test::open_error<TensorRows>(bytes, seal);
}

TEST(TensorRows, ReopenedByPathReadsEveryRowAndLabel) {
  const Example source = example();
  auto rows = TensorRows::build(source.data());
  auto copy = TensorRows::open(rows->proc_path());
  ASSERT_EQ(copy->size(), 5);
  EXPECT_EQ(copy->element_type(), ElementType::kInt16);
  EXPECT_EQ(copy->row_shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(copy->row_bytes(), 12u);
  for (int64_t row = 0; row < 5; ++row) {
    int16_t out[6] = {};
    EXPECT_EQ(copy->copy_row(row, out), 10 * row);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(out[k], 100 * row + k);
  }
}

TEST(TensorRows, DigestSaysWhatTheRowsHoldNotWhereTheyAre) {
  Example source = example();
  auto first = TensorRows::build(source.data());
  auto again = TensorRows::build(source.data());
  EXPECT_NE(first->proc_path(), again->proc_path());
  EXPECT_EQ(first->digest(), again->digest());
  EXPECT_EQ(TensorRows::open(first->proc_path())->digest(), first->digest());
  source.labels[4] += 1;
  EXPECT_NE(TensorRows::build(source.data())->digest(), first->digest());
  source.labels[4] -= 1;
  source.values[29] += 1;  // the last element of the last row
  EXPECT_NE(TensorRows::build(source.data())->digest(), first->digest());
}

TEST(TensorRows, WithoutLabelsTargetsAreZero) {
  Example source = example();
  TensorRowsData data = source.data();
  data.labels = nullptr;
  auto rows = TensorRows::open(TensorRows::build(data)->proc_path());
  int16_t out[6];
  EXPECT_FALSE(rows->has_labels());
  EXPECT_EQ(rows->copy_row(4, out), 0);
  EXPECT_EQ(out[5], 405);
}

TEST(TensorRows, IndexOutsideIsNamed) {
  auto rows = TensorRows::build(example().data());
  int16_t out[6];
  try {
    rows->copy_row(5, out);
    FAIL();
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("sample 5"), std::string::npos);
  }
  EXPECT_THROW(rows->copy_row(-1, out), IoError);
}

TEST(TensorRows, UnsealedMemfdIsRefused) {
  auto rows = TensorRows::build(example().data());
  EXPECT_NE(open_error(bytes_of(*rows), false).find("sealed"), std::string::npos);
  EXPECT_EQ(open_error(bytes_of(*rows), true), "");
}

TEST(TensorRows, CorruptHeadersAreNamedBeforeAnyRowIsRead) {
  auto rows = TensorRows::build(example().data());
  const std::vector<uint8_t> bytes = bytes_of(*rows);
  auto with = [&](const std::function<void(TensorRowsHeader&)>& edit) {
    std::vector<uint8_t> copy = bytes;
    TensorRowsHeader header;
    std::memcpy(&header, copy.data(), sizeof header);
    edit(header);
    std::memcpy(copy.data(), &header, sizeof header);
    return open_error(copy);
  };
  auto says = [](const std::string& what, const char* reason) {
    return what.find(reason) != std::string::npos;
  };
  EXPECT_TRUE(says(with([](auto& h) { h.magic ^= 1; }), "bad magic"));
  EXPECT_TRUE(says(with([](auto& h) { h.version = 7; }), "version 7"));
  EXPECT_TRUE(says(with([](auto& h) { h.header_bytes = 64; }), "header of 64 bytes"));
  EXPECT_TRUE(says(with([](auto& h) { h.element_type = 99; }), "element type code 99"));
  EXPECT_TRUE(says(with([](auto& h) { h.row_dims = 9; }), "9 dimensions"));
  EXPECT_TRUE(says(with([](auto& h) { h.row_bytes = 24; }), "row_bytes 24"));
  // A row shape whose product overflows is refused, not wrapped round.
  EXPECT_TRUE(says(with([](auto& h) {
    h.row_shape[0] = uint64_t{1} << 40;
    h.row_shape[1] = uint64_t{1} << 40;
  }), "does not match the row shape"));
  EXPECT_TRUE(says(with([](auto& h) { h.count = 0; }), "no rows"));
  // Counts and offsets that reach past the file (or overflow) are refused.
  EXPECT_TRUE(says(with([](auto& h) { h.count = 6; }), "do not match"));
  EXPECT_TRUE(says(with([](auto& h) { h.count = uint64_t{1} << 62; }), "do not match"));
  EXPECT_TRUE(says(with([](auto& h) { h.data_offset = 1 << 20; }), "data at 1048576"));
  EXPECT_TRUE(says(with([](auto& h) { h.labels_offset = h.total_bytes - 8; }),
                   "do not match"));
  EXPECT_TRUE(says(with([](auto& h) { h.labels_offset = 0; }), "do not match"));
  EXPECT_TRUE(says(with([](auto& h) { h.total_bytes += 8; }), "do not match"));
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 1);
  EXPECT_TRUE(says(open_error(cut), "do not match"));
  std::vector<uint8_t> tiny(bytes.begin(), bytes.begin() + 10);
  EXPECT_TRUE(says(open_error(tiny), "less than its header"));
}

TEST(TensorRows, MissingFileIsNamed) {
  try {
    TensorRows::open("/proc/self/fd/100000");
    FAIL();
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("/proc/self/fd/100000"), std::string::npos);
  }
}

TEST(TensorRows, BadDescriptionsAreOptionErrors) {
  Example source = example();
  TensorRowsData empty = source.data();
  empty.row_count = 0;
  EXPECT_THROW(TensorRows::build(empty), OptionError);
  TensorRowsData deep = source.data();
  deep.row_shape.assign(9, 1);
  EXPECT_THROW(TensorRows::build(deep), OptionError);
  TensorRowsData negative = source.data();
  negative.row_shape = {-2, 3};
  EXPECT_THROW(TensorRows::build(negative), OptionError);
  TensorRowsData huge = source.data();
  huge.row_shape = {1 << 30, 4};  // an 8 GiB row
  EXPECT_THROW(TensorRows::build(huge), OptionError);
  huge.type = ElementType::kUInt8;
  huge.row_shape = {int64_t{1} << 31};  // one byte over a ring sample's int width
  EXPECT_THROW(TensorRows::build(huge), OptionError);
  EXPECT_THROW(element_type_from_name("complex64"), OptionError);
  EXPECT_EQ(element_type_from_name("bfloat16"), ElementType::kBFloat16);
  EXPECT_STREQ(name_of(ElementType::kBool), "bool");
}

TEST(TensorRows, DatasetDescriptionReopensTheSameRows) {
  const Example source = example();
  const Dataset dataset = Dataset::tensor_rows(source.data());
  EXPECT_EQ(dataset.size(), 5);
  const nlohmann::json description = dataset.to_json();
  EXPECT_EQ(description.at("kind"), "rows");
  const Dataset copy = Dataset::from_json(description);
  int16_t out[6];
  EXPECT_EQ(copy.tensor_rows()->copy_row(3, out), 30);
  EXPECT_EQ(out[0], 300);
  // A ring sample is one row: a 1 x row_bytes gray image.
  EXPECT_EQ(copy.image_height(), 1);
  EXPECT_EQ(copy.image_width(), 12);
  nlohmann::json wrong = description;
  wrong["count"] = 6;
  EXPECT_THROW(Dataset::from_json(wrong), IoError);
  wrong = description;
  wrong["digest"] = "0000000000000000";
  EXPECT_THROW(Dataset::from_json(wrong), IoError);
  EXPECT_THROW(Dataset::mix({{dataset, 1.0}, {dataset, 1.0}}), OptionError);
}

}  // namespace
}  // namespace ringloader::data
