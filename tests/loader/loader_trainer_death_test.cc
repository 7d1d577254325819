// SPDX-License-Identifier: BSD-3-Clause
// However the trainer ends (SIGKILL, exit without destructors, an uncaught
// exception, a normal return) mid-epoch, no worker outlives it by more than
// 2 s and nothing is left on any filesystem: the ring is a memfd.
#include <dirent.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>
#include <thread>

#include "test_data.h"

extern char** environ;

namespace ringloader {
namespace {

// /dev/shm's entries that neither torch's shared-memory manager ("torch_")
// nor Python's multiprocessing ("sem.", "psm_", "mp-") made: ctest runs the
// Python suite beside this test, and its torch DataLoaders come and go there.
std::set<std::string> foreign_shm_entries() {
  std::set<std::string> out;
  DIR* dir = opendir("/dev/shm");
  if (!dir) return out;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    bool known = false;
    for (const char* prefix : {"torch_", "sem.", "psm_", "mp-"}) {
      known = known || name.rfind(prefix, 0) == 0;
    }
    if (!known) out.insert(name);
  }
  closedir(dir);
  return out;
}

using TrainerDeath = testing::FolderTest<2, 6>;

TEST_F(TrainerDeath, NoWorkerOrFileOutlivesTheTrainer) {
  const std::set<std::string> shm_before = foreign_shm_entries();
  for (std::string mode : {"wait", "exit", "throw", "return"}) {
    SCOPED_TRACE(mode);
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::string helper = testing::sibling_executable("ringloader_test_trainer");
    std::string folder = dir_ / "images";
    const char* argv[] = {helper.c_str(), folder.c_str(), mode.c_str(), nullptr};
    pid_t trainer = -1;
    ASSERT_EQ(posix_spawn(&trainer, helper.c_str(), &actions, nullptr,
                          const_cast<char* const*>(argv), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    FILE* lines = fdopen(out[0], "r");
    std::vector<int> workers;
    char line[64];
    while (std::fgets(line, sizeof(line), lines) && std::string(line) != "ready\n") {
      workers.push_back(std::atoi(line));
    }
    ASSERT_EQ(workers.size(), 2u);
    if (mode == "wait") {
      // The other modes end on their own, possibly before this line.
      for (int pid : workers) EXPECT_TRUE(testing::process_alive(pid));
      ASSERT_EQ(kill(trainer, SIGKILL), 0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(trainer, &status, 0), trainer);
    fclose(lines);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (int pid : workers) {
      while (testing::process_alive(pid) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_FALSE(testing::process_alive(pid)) << "worker " << pid << " outlived the trainer";
    }
  }
  std::vector<std::string> left;
  for (const std::string& name : foreign_shm_entries()) {
    if (!shm_before.count(name)) left.push_back(name);
  }
  EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << left.front();
}

// exec keeps the pid, so a parent-pid check cannot see it: workers watch a
// lock that only the trainer's own (close-on-exec) descriptor holds.
TEST_F(TrainerDeath, WorkersEndWhenTheTrainerExecsAway) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::string helper = testing::sibling_executable("ringloader_test_trainer");
  std::string folder = dir_ / "images";
  const char* argv[] = {helper.c_str(), folder.c_str(), "exec", nullptr};
  pid_t trainer = -1;
  ASSERT_EQ(posix_spawn(&trainer, helper.c_str(), &actions, nullptr,
                        const_cast<char* const*>(argv), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  FILE* lines = fdopen(out[0], "r");
  std::vector<int> workers;
  char line[64];
  while (std::fgets(line, sizeof(line), lines) && std::string(line) != "ready\n") {
    workers.push_back(std::atoi(line));
  }
  fclose(lines);
  ASSERT_EQ(workers.size(), 2u);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (int pid : workers) {
    while (testing::process_alive(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_FALSE(testing::process_alive(pid)) << "worker " << pid << " outlived its trainer's exec";
  }
  EXPECT_TRUE(testing::process_alive(trainer));  // still there, now /bin/sleep
  kill(trainer, SIGKILL);
  int status = 0;
  waitpid(trainer, &status, 0);
}

}  // namespace
}  // namespace ringloader
