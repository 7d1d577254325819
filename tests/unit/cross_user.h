// SPDX-License-Identifier: BSD-3-Clause
// Tests that act as another user (`nobody`): they need root, skip without
// it, and say that they ran. CI runs as root; scripts/test.sh sets
// RINGLOADER_CROSS_USER_LOG and prints how many such tests ran and how many
// skipped, so a CI run whose cross-user tests silently skipped shows it.
//
//   TEST_F(Suite, Name) {
//     RINGLOADER_CROSS_USER_TEST();  // first line: skips unless root
//     ... as_nobody([&] { return symlink(...) == 0; }) ...
//   }
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ringloader::testing {

constexpr uid_t kNobody = 65534;

// One line, "c++ <Suite.Name> ran|skipped", appended to the log in one
// write(2) (O_APPEND: lines of concurrent tests never interleave).
inline void record_cross_user(const char* outcome) {
  const char* log = std::getenv("RINGLOADER_CROSS_USER_LOG");
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  if (!log || !*log || !test) return;
  const std::string line = std::string("c++ ") + test->test_suite_name() + "." + test->name() +
                           " " + outcome + "\n";
  const int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t ignored = write(fd, line.data(), line.size());
  (void)ignored;
  close(fd);
}

// Runs `attack` in a child that has become `nobody`; whether it succeeded.
template <typename Attack>
bool as_nobody(Attack attack) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
        setresuid(kNobody, kNobody, kNobody) != 0) {
      _exit(2);
    }
    _exit(attack() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace ringloader::testing

#define RINGLOADER_CROSS_USER_TEST()                                         \
  do {                                                                       \
    if (geteuid() != 0) {                                                    \
      ::ringloader::testing::record_cross_user("skipped");                   \
      GTEST_SKIP() << "needs root to act as another user (nobody)";          \
    }                                                                        \
    ::ringloader::testing::record_cross_user("ran");                         \
  } while (0)
