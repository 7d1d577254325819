// SPDX-License-Identifier: BSD-3-Clause
// A bad-input corpus the test makes itself, run through the Loader in both
// error policies. With OnError::kRaise every bad sample's batch raises a
// typed error naming the file, the sample index and the reason, and
// iteration goes on; with "skip" every bad sample is replaced, counted and
// logged, batches stay full, and the epoch is the same for any worker count.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

enum class Kind { kIo, kDecode };

struct BadCase {
  std::string name;
  std::string bytes;  // content written to `name` (ignored for kMake)
  Kind kind;
  std::string reason;  // a phrase the error must contain
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string bmp_header(uint32_t width, uint32_t height) {
  std::string bmp(54, '\0');
  bmp[0] = 'B', bmp[1] = 'M', bmp[10] = 54, bmp[14] = 40;
  for (int i = 0; i < 4; ++i) {
    bmp[18 + i] = static_cast<char>((width >> (8 * i)) & 255);
    bmp[22 + i] = static_cast<char>((height >> (8 * i)) & 255);
  }
  bmp[26] = 1, bmp[28] = 24;
  return bmp;
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "good", 2, 8, "png", 24, 40);
    testing::make_image_folder(dir_ / "jpeg", 1, 1, "jpg", 40, 40);
    const std::string jpeg = read_all(Dataset::image_folder(dir_ / "jpeg").files()[0].path);
    Dataset good = Dataset::image_folder(dir_ / "good");
    const std::string png = read_all(good.files()[0].path);
    cases_ = {
        {"empty.jpg", "", Kind::kDecode, "empty file"},
        {"truncated.jpg", jpeg.substr(0, jpeg.size() / 2), Kind::kDecode, "truncated JPEG"},
        {"truncated.png", png.substr(0, png.size() / 2), Kind::kDecode, "PNG"},
        {"header.jpg", "\xff\xd8\xff\xe0garbage that is no JFIF header", Kind::kDecode,
         "JPEG"},
        {"header.png", std::string("\x89PNG\r\n\x1a\n", 8) + "no IHDR here", Kind::kDecode,
         "PNG"},
        {"notes.png", "just some text, no image at all", Kind::kDecode,
         "unsupported"},
        {"bomb.bmp", bmp_header(100000, 100000), Kind::kDecode,
         "100000x100000 pixels exceeds the limit"},
        {"missing.jpg", "", Kind::kIo, "No such file"},
        {"folder.jpg", "", Kind::kIo, "not a regular file"},
    };
    std::vector<FileSample> files;
    for (size_t i = 0; i < good.files().size(); ++i) {
      files.push_back(good.files()[i]);
      if (i < cases_.size()) {
        const BadCase& bad = cases_[i];
        std::string path = dir_ / bad.name;
        if (bad.name == "folder.jpg") {
          ASSERT_EQ(mkdir(path.c_str(), 0700), 0);
        } else if (bad.name != "missing.jpg") {
          testing::write_file(path, bad.bytes);
        }
        bad_index_[static_cast<int64_t>(files.size())] = bad;
        files.push_back({path, 9});
      }
    }
    // Wrong extensions are not bad: formats are sniffed from magic bytes.
    testing::write_file(dir_ / "png_named.jpg", png);
    testing::write_file(dir_ / "jpeg_named.png", jpeg);
    files.push_back({dir_ / "png_named.jpg", 0});
    files.push_back({dir_ / "jpeg_named.png", 0});
    files_ = files;
  }
  LoaderOptions opts(int batch_size, int workers, OnError on_error) {
    LoaderOptions options = testing::make_options(batch_size, workers);
    options.on_error = on_error;
    options.shuffle = true;
    options.seed = 3;
    options.max_image_pixels = 1 << 24;
    return options;
  }
  testing::TempDir dir_;
  std::vector<BadCase> cases_;
  std::map<int64_t, BadCase> bad_index_;
  std::vector<FileSample> files_;
};

TEST_F(BadInput, EveryCaseIsATypedErrorNamingFileSampleAndReason) {
  for (int workers : {0, 2}) {
    Loader loader(Dataset::file_list(files_), Pipeline{CenterCrop(16)},
                  opts(1, workers, OnError::kRaise));
    loader.begin_epoch();
    std::set<int64_t> failed, delivered;
    for (int64_t b = 0; b < loader.size(); ++b) {
      try {
        std::optional<Batch> batch = loader.next();
        ASSERT_TRUE(batch.has_value());
        delivered.insert(batch->sample_indices.at(0));
      } catch (const Error& error) {
        std::string message = error.what();
        int64_t sample = -1;
        for (const auto& [index, bad] : bad_index_) {
          if (message.find("sample " + std::to_string(index) + " ") != std::string::npos) {
            sample = index;
          }
        }
        ASSERT_NE(sample, -1) << "no bad sample named in: " << message;
        const BadCase& bad = bad_index_.at(sample);
        EXPECT_NE(message.find(dir_ / bad.name), std::string::npos) << message;
        EXPECT_NE(message.find(bad.reason), std::string::npos) << message;
        if (bad.kind == Kind::kIo) {
          EXPECT_NE(dynamic_cast<const IoError*>(&error), nullptr) << message;
        } else {
          EXPECT_NE(dynamic_cast<const DecodeError*>(&error), nullptr) << message;
        }
        failed.insert(sample);
      }
    }
    EXPECT_FALSE(loader.next().has_value());
    EXPECT_EQ(failed.size(), cases_.size()) << workers << " workers";
    EXPECT_EQ(delivered.size() + failed.size(), files_.size());
  }
}

TEST_F(BadInput, SkipReplacesCountsAndLogsEveryBadSampleDeterministically) {
  std::vector<std::vector<int64_t>> orders;
  std::vector<std::string> bytes;
  for (int workers : {0, 2}) {
    ::testing::internal::CaptureStderr();
    std::vector<int64_t> order;
    std::string data;
    LoaderStats stats;
    {
      Loader loader(Dataset::file_list(files_), Pipeline{CenterCrop(16), ToTensor()},
                    opts(4, workers, OnError::kSkip));
      for (Batch& batch : loader) {
        EXPECT_EQ(batch.data.size(0), static_cast<int64_t>(batch.sample_indices.size()));
        if (batch.index + 1 < loader.size()) EXPECT_EQ(batch.data.size(0), 4);
        for (int64_t s : batch.sample_indices) {
          EXPECT_EQ(bad_index_.count(s), 0u) << "bad sample " << s << " delivered";
          order.push_back(s);
        }
        data.append(static_cast<const char*>(batch.data.data_ptr()), batch.data.nbytes());
      }
      stats = loader.stats();
    }
    std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(order.size(), files_.size()) << "batches stay full-sized";
    EXPECT_EQ(stats.skipped_samples, static_cast<int64_t>(cases_.size()))
        << stats.to_string();
    for (const auto& [index, bad] : bad_index_) {
      EXPECT_NE(log.find("skipped sample " + std::to_string(index) + " (" + (dir_ / bad.name)),
                std::string::npos)
          << log;
    }
    orders.push_back(order);
    bytes.push_back(data);
  }
  EXPECT_EQ(orders[0], orders[1]);
  EXPECT_TRUE(bytes[0] == bytes[1]) << "0 and 2 workers wrote different bytes";
}

TEST_F(BadInput, SkipGivesUpOnlyWhenNothingLoads) {
  std::vector<FileSample> all_bad;
  for (const auto& [index, bad] : bad_index_) all_bad.push_back({dir_ / bad.name, 0});
  Loader loader(Dataset::file_list(all_bad), Pipeline{CenterCrop(16)},
                opts(2, 1, OnError::kSkip));
  loader.begin_epoch();
  try {
    loader.next();
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("substitutes"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace ringloader
