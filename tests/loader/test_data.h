// SPDX-License-Identifier: BSD-3-Clause
// Small datasets the tests make themselves in a temporary folder.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringloader/ringloader.h"

namespace ringloader::testing {

// A fresh empty folder under $TMPDIR, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// root/<class_i>/<j>.<ext>: `per_class` images per class of varying sizes
// with content that depends on (class, j), written with OpenCV.
void make_image_folder(const std::string& root, int classes, int per_class,
                       const std::string& extension = "png", int min_side = 24,
                       int max_side = 48);

void write_file(const std::string& path, const std::string& bytes);

// `name` in the test executable's own folder (ringloader-shard, the test
// trainer and worker programs the build puts beside it).
std::string sibling_executable(const std::string& name);

// File descriptors of this process that point at a ringloader memfd, and
// its mappings of one: both must be empty once every Loader is gone.
int count_ringloader_fds();
int count_ringloader_mappings();
bool process_alive(int pid);
// Waits up to `timeout_s` for child `pid` and says how it ended: "exit 0",
// "exit 3", "signal 11", or "hung" (then it is killed and reaped), so a
// child that hangs fails its test instead of stalling the suite.
std::string child_ending(int pid, double timeout_s);

LoaderOptions make_options(int batch_size, int num_workers);

// A fixture with a fresh image folder of `Classes` x `PerClass` PNGs.
template <int Classes, int PerClass>
class FolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_image_folder(dir_ / "images", Classes, PerClass);
    dataset_ = Dataset::image_folder(dir_ / "images");
  }
  LoaderOptions options(int batch_size, int num_workers) {
    return make_options(batch_size, num_workers);
  }
  TempDir dir_;
  Dataset dataset_;
};

}  // namespace ringloader::testing
