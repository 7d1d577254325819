// SPDX-License-Identifier: BSD-3-Clause
// A shard index is data: the pipe: commands it lists run only when the
// index file is as trustworthy as the caller's own arguments (owned by this
// user or root, writable by no one else, in folders no one else may rename
// in), as ssh treats its configuration. Otherwise construction fails with
// an IoError naming the file and why, before any command runs. Commands the
// caller passes in its URLs run whatever the index.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "loader/data/fetch/shard_input.h"
#include "tests/unit/cross_user.h"
#include "tests/unit/data/tar_shard_fixture.h"

namespace ringloader::data {
namespace {

class TarManifestTrustTest : public TarShardTest {
 protected:
  void SetUp() override {
    TarShardTest::SetUp();
    marker_ = dir_ + "/ran";
    url_ = "pipe:touch '" + marker_ + "'; cat '" + make_shard("s-0.tar", 0, 3) + "'";
  }
  // A full index of the one shard behind url_, written 0644 at `name`;
  // the indexing ran the command, so the marker is removed after.
  std::string index_listing_the_command(const std::string& name = "index.json") {
    const std::string path = write_manifest({url_}, name);
    EXPECT_EQ(chmod(path.c_str(), 0644), 0);
    unlink(marker_.c_str());
    return path;
  }
  bool command_ran() const { return access(marker_.c_str(), F_OK) == 0; }
  // Loads the index, then reads its first shard as a worker would (which
  // runs a pipe: command). "(no error)" or the IoError's message.
  static std::string load_and_read(const std::string& index,
                                   const std::vector<std::string>& urls = {}) {
    try {
      TarIndex loaded = load_tar_manifest(index, urls, 0);
      auto input = open_shard(loaded.shards.at(0));
      uint8_t buffer[4096];
      while (input->read(buffer, sizeof buffer) > 0) {
      }
    } catch (const IoError& error) {
      return error.what();
    }
    return "(no error)";
  }
  static void expect_refused(const std::string& error, const std::string& index,
                             const std::string& why) {
    EXPECT_NE(error.find("shard index " + index + " lists pipe: commands"), std::string::npos)
        << error;
    EXPECT_NE(error.find(why), std::string::npos) << error;
  }
  std::string marker_, url_;
};

TEST_F(TarManifestTrustTest, OurOwnIndexRunsItsCommands) {
  const std::string index = index_listing_the_command();
  EXPECT_EQ(load_and_read(index), "(no error)");
  EXPECT_TRUE(command_ran());
}

TEST_F(TarManifestTrustTest, AGroupWritableIndexDoesNotRunItsCommands) {
  const std::string index = index_listing_the_command();
  ASSERT_EQ(chmod(index.c_str(), 0664), 0);
  expect_refused(load_and_read(index), index, "but it is writable by its group (mode 0664)");
  EXPECT_FALSE(command_ran()) << "a group-writable index ran its command";
}

TEST_F(TarManifestTrustTest, AnIndexInAFolderOthersMayWriteDoesNotRunItsCommands) {
  const std::string index = index_listing_the_command();
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);  // not sticky: others may swap the file
  expect_refused(load_and_read(index), index,
                 "its folder " + dir_ + " is writable by others (mode 0777)");
  EXPECT_FALSE(command_ran());
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);  // sticky, as /tmp: others cannot
  EXPECT_EQ(load_and_read(index), "(no error)");
  EXPECT_TRUE(command_ran());
}

TEST_F(TarManifestTrustTest, AnIndexReadFromACommandDoesNotRunTheCommandsItLists) {
  const std::string index = index_listing_the_command();
  expect_refused(load_and_read("pipe:cat '" + index + "'"), "pipe:cat '" + index + "'",
                 "it is the output of a command");
  EXPECT_FALSE(command_ran());
}

// The caller's own URLs are its arguments: they run whatever the index.
TEST_F(TarManifestTrustTest, CommandsTheCallerPassesRunWhateverTheIndex) {
  const std::string index = index_listing_the_command();
  ASSERT_EQ(chmod(index.c_str(), 0666), 0);
  EXPECT_EQ(load_and_read(index, {url_}), "(no error)");
  EXPECT_TRUE(command_ran());
}

// `nobody` writes the index into a shared sticky folder: its commands
// would run as root.
TEST_F(TarManifestTrustTest, AnIndexOfAnotherUserDoesNotRunItsCommands) {
  RINGLOADER_CROSS_USER_TEST();
  const std::string mine = index_listing_the_command("mine.json");
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);
  const std::string index = dir_ + "/index.json";
  const std::string text = read_json(mine).dump();
  ASSERT_TRUE(testing::as_nobody([&] {
    const int fd = open(index.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    return fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
           close(fd) == 0;
  }));
  expect_refused(load_and_read(index), index,
                 "but it is owned by uid 65534, neither this process's uid (0) nor root");
  EXPECT_FALSE(command_ran()) << "nobody's index ran its command as root";
}

}  // namespace
}  // namespace ringloader::data
