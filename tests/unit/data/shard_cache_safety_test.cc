// SPDX-License-Identifier: BSD-3-Clause
// The shard cache under hostile or broken conditions: a full disk evicts and
// fetches again; what a killed fetcher left is counted and removed (but not
// what a live one writes); a symlink at a .part name is never written
// through; a folder another user owns or may write is refused, naming it.
// The other-user cases need root (a child turns into `nobody`); the full
// disk needs a tmpfs mount in a private mount namespace. Both skip without.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "loader/data/fetch/shard_cache.h"
#include "loader/data/tar/tar_writer.h"
#include "ringloader/errors.h"
#include "tests/unit/cross_user.h"

namespace ringloader::data {
namespace {

using testing::kNobody;

class ShardCacheSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ringloader-cache-safety-XXXXXX";
    dir_ = mkdtemp(pattern);
    options_.dir = dir_ + "/cache";
    options_.retry_backoff_s = 0.01;
  }
  void TearDown() override {
    if (!mounted_.empty()) umount2(mounted_.c_str(), MNT_DETACH);
    std::string command = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
  }
  std::string make_shard(const std::string& name, int count) {
    std::string path = dir_ + "/" + name;
    TarWriter writer(path);
    for (int n = 0; n < count; ++n) {
      std::string image = name + std::to_string(n) + std::string(3000 + n * 97, 'x');
      writer.add(std::to_string(n) + ".jpg", image.data(), image.size());
    }
    writer.close();
    return path;
  }
  std::string stem(const std::string& url) {
    return options_.dir + "/" + ShardCache::name_for(url);
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  static bool exists(const std::string& path) {
    struct stat info {};
    return lstat(path.c_str(), &info) == 0;
  }
  static int lines(const std::string& path) {
    std::istringstream text(read(path));
    std::string line;
    int n = 0;
    while (std::getline(text, line)) ++n;
    return n;
  }
  std::string contents(ShardCache& cache, const std::string& url) {
    auto input = cache.open(url, 0);
    std::string bytes(input->size(), '\0');
    input->read_at(0, reinterpret_cast<uint8_t*>(bytes.data()), bytes.size());
    return bytes;
  }
  std::string error_of(const std::string& url) {
    try {
      ShardCache cache(options_);
      cache.open(url, 0);
    } catch (const IoError& error) {
      return error.what();
    }
    return "(no error)";
  }
  template <typename Attack>
  static bool as_nobody(Attack attack) {
    return testing::as_nobody(attack);
  }
  std::string dir_;
  std::string mounted_;
  ShardCacheOptions options_;
};

// A full disk no longer fails the fetch fetch_attempts times: the least
// recently used copy goes, and the fetch is run again at once.
TEST_F(ShardCacheSafety, AFullDiskEvictsAndFetchesAgain) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  std::vector<std::string> shards, urls;
  const std::string counter = dir_ + "/runs";
  for (int i = 0; i < 4; ++i) {
    shards.push_back(make_shard("s" + std::to_string(i) + ".tar", 4));
    urls.push_back("pipe:echo " + std::to_string(i) + " >> '" + counter + "'; cat '" +
                   shards.back() + "'");
  }
  struct stat info {};
  ASSERT_EQ(stat(shards[0].c_str(), &info), 0);
  const uint64_t pages = (static_cast<uint64_t>(info.st_size) + 4095) / 4096;
  // Room for three copies and a half: the fourth fills the disk.
  const std::string size = "size=" + std::to_string((pages * 7 / 2) * 4096);
  ASSERT_EQ(mkdir(options_.dir.c_str(), 0700), 0);
  if (unshare(CLONE_NEWNS) != 0 ||
      mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("tmpfs", options_.dir.c_str(), "tmpfs", 0, (size + ",mode=0700").c_str()) != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  mounted_ = options_.dir;
  ShardCache cache(options_);  // the default limit (16 GiB): only the disk is full
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(contents(cache, urls[i]), read(shards[i]));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // distinct mtimes
  }
  std::string fourth;
  ASSERT_NO_THROW(fourth = contents(cache, urls[3]));
  EXPECT_EQ(fourth, read(shards[3]));
  EXPECT_EQ(cache.fetches(), 4);
  EXPECT_FALSE(exists(stem(urls[0]) + ".shard"));  // the least recently used went
  EXPECT_TRUE(exists(stem(urls[2]) + ".shard"));
  EXPECT_FALSE(exists(stem(urls[3]) + ".part"));
  EXPECT_EQ(lines(counter), 5);  // the fourth command ran twice, once cut short

  // Every copy held open by a reader: nothing to evict, a clear error.
  std::vector<std::shared_ptr<FileInput>> held;
  for (int i = 1; i < 4; ++i) held.push_back(cache.open(urls[i], 0));
  std::string error;
  try {
    cache.open(urls[0], 0);
  } catch (const IoError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
  EXPECT_NE(error.find("no cached copy that no reader holds"), std::string::npos) << error;
}

TEST_F(ShardCacheSafety, KilledFetchersLeftoversAreCountedAndRemoved) {
  const std::string shard = make_shard("a.tar", 3);
  const std::string command_pid = dir_ + "/command.pid";
  const std::string stuck =
      "pipe:echo $$ > '" + command_pid + "'; head -c 1000 '" + shard + "'; sleep 60";
  const std::string slow = "pipe:sleep 0.6; cat '" + shard + "'";
  ShardCache fetching(options_);  // started before the kill: it saw nothing stale
  pid_t fetcher = fork();
  if (fetcher == 0) {
    ShardCache cache(options_);
    cache.open(stuck, 0);  // never returns: killed while fetching
    _exit(1);
  }
  // Killed once its command runs (it wrote its pid): mid-fetch.
  for (int i = 0; i < 500 && read(command_pid).find('\n') == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(exists(stem(stuck) + ".part"));
  kill(fetcher, SIGKILL);
  waitpid(fetcher, nullptr, 0);
  // The command has a process group of its own (PipeInput): end it too.
  const pid_t command = static_cast<pid_t>(std::atol(read(command_pid).c_str()));
  if (command > 1) kill(-command, SIGKILL);
  ASSERT_TRUE(exists(stem(stuck) + ".part"));  // what a killed fetcher leaves

  // A fetch that is running when the next cache starts keeps its .part.
  std::thread live([&] { EXPECT_EQ(contents(fetching, slow), read(shard)); });
  for (int i = 0; i < 300 && !exists(stem(slow) + ".part"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ShardCache next(options_);
  EXPECT_FALSE(exists(stem(stuck) + ".part"));
  EXPECT_FALSE(exists(stem(stuck) + ".err"));
  EXPECT_EQ(next.stale_parts_removed(), 1);
  EXPECT_TRUE(exists(stem(slow) + ".part"));  // still being fetched
  live.join();
  EXPECT_FALSE(exists(stem(slow) + ".part"));
  EXPECT_EQ(fetching.fetches(), 1);
  EXPECT_EQ(fetching.stale_parts_removed(), 0);
}

TEST_F(ShardCacheSafety, ASymlinkAtThePartNameIsNeverWrittenThrough) {
  const std::string shard = make_shard("a.tar", 3);
  const std::string url = "pipe:cat '" + shard + "'";
  const std::string victim = dir_ + "/victim", victim_err = dir_ + "/victim.err";
  write(victim, "precious");
  write(victim_err, "precious too");
  { ShardCache create(options_); }
  ASSERT_EQ(symlink(victim.c_str(), (stem(url) + ".part").c_str()), 0);
  ASSERT_EQ(symlink(victim_err.c_str(), (stem(url) + ".err").c_str()), 0);
  ShardCache cache(options_);
  EXPECT_EQ(contents(cache, url), read(shard));
  EXPECT_TRUE(read(victim) == "precious") << "written through the .part symlink";
  EXPECT_TRUE(read(victim_err) == "precious too") << "written through the .err symlink";
  struct stat info {};
  ASSERT_EQ(lstat((stem(url) + ".shard").c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_mode & 077, 0u);  // the copy is readable by its owner only
}

// A folder others may write (as /tmp): `nobody` plants a symlink where the
// next fetch writes. The cache refuses the folder instead of using it.
TEST_F(ShardCacheSafety, AFolderOthersMayWriteIsRefused) {
  RINGLOADER_CROSS_USER_TEST();
  const std::string shard = make_shard("a.tar", 3);
  const std::string url = "pipe:cat '" + shard + "'";
  const std::string victim = dir_ + "/victim";
  write(victim, "precious");
  ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);
  ASSERT_EQ(mkdir(options_.dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(options_.dir.c_str(), 01777), 0);
  const std::string planted = stem(url) + ".part";
  ASSERT_TRUE(as_nobody([&] { return symlink(victim.c_str(), planted.c_str()) == 0; }));
  std::string error = error_of(url);
  EXPECT_NE(error.find(options_.dir), std::string::npos) << error;
  EXPECT_NE(error.find("writable by others"), std::string::npos) << error;
  EXPECT_TRUE(read(victim) == "precious") << "written through the planted symlink";
  ASSERT_EQ(chmod(options_.dir.c_str(), 0770), 0);  // a group may write: refused too
  error = error_of(url);
  EXPECT_NE(error.find("writable by its group"), std::string::npos) << error;
  EXPECT_TRUE(read(victim) == "precious") << "written through the planted symlink";
}

TEST_F(ShardCacheSafety, AFolderOfAnotherUserIsRefused) {
  RINGLOADER_CROSS_USER_TEST();
  const std::string url = "pipe:cat '" + make_shard("a.tar", 3) + "'";
  ASSERT_EQ(mkdir(options_.dir.c_str(), 0755), 0);
  ASSERT_EQ(chown(options_.dir.c_str(), kNobody, kNobody), 0);
  std::string error = error_of(url);
  EXPECT_NE(error.find("shard cache folder " + options_.dir + " is owned by uid 65534"),
            std::string::npos) << error;
  EXPECT_FALSE(exists(stem(url) + ".shard"));
}

// The path to the folder is checked component by component, as opened
// (folder_walk.h): before, only the last component was lstat'ed, so a
// symlink `nobody` planted as a parent put the cache's files where it chose.
TEST_F(ShardCacheSafety, ASymlinkOfAnotherUserOnThePathIsRefused) {
  RINGLOADER_CROSS_USER_TEST();
  const std::string url = "pipe:cat '" + make_shard("a.tar", 3) + "'";
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);  // shared, sticky: as /tmp
  const std::string elsewhere = dir_ + "/nobodys", link = dir_ + "/scratch";
  ASSERT_TRUE(as_nobody([&] {
    return mkdir(elsewhere.c_str(), 0777) == 0 && chmod(elsewhere.c_str(), 0777) == 0 &&
           symlink(elsewhere.c_str(), link.c_str()) == 0;
  }));
  // A parent component: the cache would live in nobody's folder.
  options_.dir = link + "/cache";
  std::string error = error_of(url);
  EXPECT_NE(error.find("shard cache folder " + options_.dir + ": " + link +
                       " is a symlink owned by uid 65534"), std::string::npos) << error;
  EXPECT_FALSE(exists(elsewhere + "/cache")) << "the cache was made in nobody's folder";
  // The last component: nobody's symlink to a folder of ours.
  const std::string ours = dir_ + "/ours", last = dir_ + "/last";
  ASSERT_EQ(mkdir(ours.c_str(), 0700), 0);
  ASSERT_TRUE(as_nobody([&] { return symlink(ours.c_str(), last.c_str()) == 0; }));
  options_.dir = last;
  error = error_of(url);
  EXPECT_NE(error.find("shard cache folder " + last + ": " + last +
                       " is a symlink owned by uid 65534"), std::string::npos) << error;
  EXPECT_FALSE(exists(ours + "/" + ShardCache::name_for(url) + ".lock"));
  // Our own symlink to our own folder is followed.
  ASSERT_EQ(symlink(ours.c_str(), (dir_ + "/mine").c_str()), 0);
  options_.dir = dir_ + "/mine";
  EXPECT_EQ(error_of(url), "(no error)");
}

// A parent others may write and that is not sticky: they could rename the
// cache folder away and put one of theirs in its place.
TEST_F(ShardCacheSafety, AParentOthersMayWriteIsRefusedUnlessSticky) {
  const std::string url = "pipe:cat '" + make_shard("a.tar", 3) + "'";
  const std::string shared = dir_ + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  options_.dir = shared + "/cache";
  std::string error = error_of(url);
  EXPECT_NE(error.find("shard cache folder " + options_.dir + ": " + shared +
                       " is writable by others and not sticky (mode 0777)"),
            std::string::npos) << error;
  EXPECT_FALSE(exists(options_.dir)) << "made inside a folder others may write";
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  EXPECT_EQ(error_of(url), "(no error)");
}

}  // namespace
}  // namespace ringloader::data
