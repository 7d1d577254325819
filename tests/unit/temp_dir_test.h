// SPDX-License-Identifier: BSD-3-Clause
// A GoogleTest fixture that gives each test a fresh folder of its own under
// /tmp (dir_), removed with everything in it when the test ends.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace ringloader {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ringloader-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr) << "mkdtemp";
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
    EXPECT_FALSE(error) << dir_ << ": " << error.message();
  }
  std::string dir_;
};

}  // namespace ringloader
