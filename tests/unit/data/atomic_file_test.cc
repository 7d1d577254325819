// SPDX-License-Identifier: BSD-3-Clause
// Every file the project writes goes through AtomicFile (atomic_file.h):
// made under a random name with O_EXCL | O_NOFOLLOW, renamed into place.
// Here: the helper alone, then ringloader-shard in a sticky folder others
// may write (as /tmp), where `nobody` planted symlinks at every name the
// tool used to write through (<index>.partial, classes.txt, the shard, the
// index): none is followed, root's files stay as they were, and every file
// the run leaves is root's own.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/data/atomic_file.h"
#include "ringloader/errors.h"
#include "tests/unit/cross_user.h"
#include "tests/unit/temp_dir_test.h"

namespace ringloader::data {
namespace {

class AtomicFileTest : public TempDirTest {
 protected:
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  static struct stat lstat_of(const std::string& path) {
    struct stat info {};
    EXPECT_EQ(lstat(path.c_str(), &info), 0) << path;
    return info;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      out.push_back(entry.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // ringloader-shard, built beside this test binary.
  static std::string tool() {
    return std::filesystem::read_symlink("/proc/self/exe").parent_path() / "ringloader-shard";
  }
};

TEST_F(AtomicFileTest, TheFileAppearsWholeAtCommitAndNotBefore) {
  const std::string path = dir_ + "/out.json";
  write(path, "old");
  {
    AtomicFile file(path);
    file.write(std::string(3 << 20, 'x'));  // past the buffer
    EXPECT_EQ(read(path), "old");
    EXPECT_EQ(names(), (std::vector<std::string>{file.temporary_name(), "out.json"}));
    file.commit();
  }
  EXPECT_EQ(read(path), std::string(3 << 20, 'x'));
  EXPECT_EQ(names(), std::vector<std::string>{"out.json"});
  { AtomicFile abandoned(path); abandoned.write("half"); }  // no commit: nothing changes
  EXPECT_EQ(read(path).size(), size_t{3} << 20);
  EXPECT_EQ(names(), std::vector<std::string>{"out.json"});
}

TEST_F(AtomicFileTest, ASymlinkAtTheTargetIsReplacedNotFollowed) {
  const std::string victim = dir_ + "/victim", path = dir_ + "/index.json";
  write(victim, "precious");
  ASSERT_EQ(symlink(victim.c_str(), path.c_str()), 0);
  write_file_atomically(path, "{}\n", 0644);
  EXPECT_EQ(read(victim), "precious");
  const struct stat info = lstat_of(path);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  const mode_t mask = umask(0);
  umask(mask);
  EXPECT_EQ(info.st_mode & 0777, 0644u & ~mask);
  EXPECT_EQ(read(path), "{}\n");
}

TEST_F(AtomicFileTest, AFolderThatCannotBeOpenedIsAnIoErrorNamingThePath) {
  const std::string path = dir_ + "/missing/out.json";
  try {
    AtomicFile file(path);
    ADD_FAILURE() << "no error";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot write " + path + ": cannot open its folder"),
              std::string::npos) << error.what();
  }
}

TEST_F(AtomicFileTest, ShardToolWritesNothingThroughSymlinksPlantedInASharedFolder) {
  RINGLOADER_CROSS_USER_TEST();
  for (const char* image : {"images/a/0.jpg", "images/a/1.jpg", "images/b/0.jpg"}) {
    std::filesystem::create_directories(std::filesystem::path(dir_ + "/" + image).parent_path());
    write(dir_ + "/" + image, std::string("image bytes ") + image);
  }
  const std::string out = dir_ + "/out", only = dir_ + "/out/only.json";
  ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);  // nobody may pass through to out/
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  ASSERT_EQ(chmod(out.c_str(), 01777), 0);  // as /tmp
  // The names the tool wrote through before: each a symlink to a root file.
  const std::vector<std::string> planted = {"train.json.partial", "train.json", "classes.txt",
                                            "train-000000.tar", "only.json.partial"};
  for (const std::string& name : planted) write(dir_ + "/victim-" + name, "precious");
  ASSERT_TRUE(testing::as_nobody([&] {
    for (const std::string& name : planted) {
      if (symlink((dir_ + "/victim-" + name).c_str(), (out + "/" + name).c_str()) != 0) {
        return false;
      }
    }
    return true;
  }));
  const std::string run = "'" + tool() + "' '" + dir_ + "/images' '" + out +
                          "/train-%06d.tar' > /dev/null && '" + tool() + "' --index-only '" +
                          only + "' '" + out + "/train-000000.tar' > /dev/null";
  ASSERT_EQ(std::system(run.c_str()), 0) << run;
  for (const std::string& name : planted) {
    EXPECT_TRUE(read(dir_ + "/victim-" + name) == "precious") << "written through " << name;
  }
  for (const std::string name : {"train.json", "classes.txt", "train-000000.tar", "only.json"}) {
    const struct stat info = lstat_of(out + "/" + name);
    EXPECT_TRUE(S_ISREG(info.st_mode)) << name << " is not the tool's own file";
    EXPECT_EQ(info.st_uid, 0u) << name;
    EXPECT_EQ(info.st_mode & 022, 0u) << name;
  }
  EXPECT_EQ(read(out + "/classes.txt"), "a\nb\n");
  EXPECT_EQ(nlohmann::json::parse(read(out + "/train.json"))["shardlist"].size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(read(only))["shardlist"][0]["nsamples"], 3);
}

}  // namespace
}  // namespace ringloader::data
