// SPDX-License-Identifier: BSD-3-Clause
// ImageFolder ordering must equal torchvision's: classes sorted, files
// sorted per folder (sorted os.walk), extensions case-insensitive, symlinked
// folders followed once.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "loader/data/files/image_folder_scan.h"
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

std::vector<std::string> relative_paths(const SampleTable& table, const std::string& root) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < table.size(); ++i) out.push_back(table.path(i).substr(root.size() + 1));
  return out;
}

// os.walk(followlinks=True) puts a dangling symlink among the files, and
// torchvision keeps it when its name matches; a symlink to a folder is
// walked, one to a file is a file, a folder named like an image is a folder.
TEST_F(FolderScanTest, SymlinksCountAsWhatTheyPointToLikeOsWalk) {
  touch("a/1.png");
  touch("b/sub/2.png");
  ASSERT_EQ(symlink((root_ + "/a/1.png").c_str(), (root_ + "/a/link.png").c_str()), 0);
  ASSERT_EQ(symlink((root_ + "/nowhere.png").c_str(), (root_ + "/a/dangling.png").c_str()), 0);
  ASSERT_EQ(symlink((root_ + "/b/sub").c_str(), (root_ + "/a/linked").c_str()), 0);
  touch("a/folder.jpg/3.png");
  auto table = scan_image_folder_table(root_);
  EXPECT_EQ(relative_paths(*table, root_),
            (std::vector<std::string>{"a/1.png", "a/dangling.png", "a/link.png",
                                      "a/folder.jpg/3.png", "a/linked/2.png", "b/sub/2.png"}));
}

TEST_F(FolderScanTest, ExtensionsAreComparedAsGivenToTheLowerCasedName) {
  touch("a/1.png");
  touch("a/2.PNG");
  touch("a/3.dat");
  FolderScanOptions options;
  options.extensions = {".png", "dat"};
  EXPECT_EQ(relative_paths(*scan_image_folder_table(root_, options), root_),
            (std::vector<std::string>{"a/1.png", "a/2.PNG", "a/3.dat"}));
  options.extensions = {".PNG"};  // never matches a lower-cased name, as in torchvision
  EXPECT_THROW(scan_image_folder_table(root_, options), IoError);
  FolderScanOptions all;
  all.all_files = true;
  touch("a/README");
  EXPECT_EQ(scan_image_folder_table(root_, all)->size(), 4);
}

// Class folders are listed on several threads; the order is the classes'.
TEST_F(FolderScanTest, ThreadCountDoesNotChangeTheOrder) {
  for (int c = 0; c < 40; ++c) {
    for (int f = 0; f < 5; ++f) touch("c" + std::to_string(c) + "/" + std::to_string(f) + ".jpg");
  }
  FolderScanOptions one, many;
  one.threads = 1;
  many.threads = 7;
  auto a = scan_image_folder_table(root_, one);
  auto b = scan_image_folder_table(root_, many);
  EXPECT_EQ(relative_paths(*a, root_), relative_paths(*b, root_));
  EXPECT_EQ(a->classes(), b->classes());
  for (int64_t i = 0; i < a->size(); ++i) EXPECT_EQ(a->label(i), b->label(i));
}

TEST_F(FolderScanTest, MissingRootIsAnError) {
  EXPECT_THROW(scan_image_folder(root_ + "/missing"), IoError);
  EXPECT_THROW(scan_image_folder(root_), IoError);  // no class folder
}

}  // namespace
}  // namespace ringloader::data
