// SPDX-License-Identifier: BSD-3-Clause
// ImageFolder ordering must equal torchvision's: classes sorted, files
// sorted per folder (sorted os.walk), extensions case-insensitive, symlinked
// folders followed once.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "loader/data/image_folder_scan.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

class FolderScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ringloader-scan-XXXXXX";
    root_ = mkdtemp(pattern);
  }
  void TearDown() override {
    std::string command = "rm -rf '" + root_ + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
  }
  void touch(const std::string& relative) {
    std::string path = root_ + "/" + relative;
    std::string command = "mkdir -p \"$(dirname '" + path + "')\"";
    ASSERT_EQ(std::system(command.c_str()), 0);
    std::ofstream(path) << "x";
  }
  std::string root_;
};

TEST_F(FolderScanTest, OrderAndLabelsLikeTorchvision) {
  touch("b/2.png");
  touch("b/10.JPG");
  touch("a/z.jpeg");
  touch("a/sub/y.png");
  touch("a/notes.txt");
  touch("B/x.bmp");
  FolderScan scan = scan_image_folder(root_);
  ASSERT_EQ(scan.classes, (std::vector<std::string>{"B", "a", "b"}));
  std::vector<std::string> paths;
  std::vector<int64_t> labels;
  for (auto& sample : scan.samples) {
    paths.push_back(sample.path.substr(root_.size() + 1));
    labels.push_back(sample.label);
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"B/x.bmp", "a/z.jpeg", "a/sub/y.png",
                                             "b/10.JPG", "b/2.png"}));
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 1, 1, 2, 2}));
}

TEST_F(FolderScanTest, SymlinkLoopIsVisitedOnce) {
  touch("a/1.png");
  ASSERT_EQ(symlink((root_ + "/a").c_str(), (root_ + "/a/loop").c_str()), 0);
  FolderScan scan = scan_image_folder(root_);
  EXPECT_EQ(scan.samples.size(), 1u);
}

TEST_F(FolderScanTest, ClassWithoutImagesIsAnError) {
  touch("a/1.png");
  touch("b/readme.txt");
  try {
    scan_image_folder(root_);
    FAIL();
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find(root_ + "/b"), std::string::npos);
  }
}

TEST_F(FolderScanTest, MissingRootIsAnError) {
  EXPECT_THROW(scan_image_folder(root_ + "/missing"), IoError);
  EXPECT_THROW(scan_image_folder(root_), IoError);  // no class folder
}

}  // namespace
}  // namespace ringloader::data
