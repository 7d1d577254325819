// SPDX-License-Identifier: BSD-3-Clause
// Construction, validation, errors and teardown: nothing outlives a Loader
// (no worker process, no memfd, no mapping), and bad input gets a typed
// error that names the file, the sample and the reason.
#include <gtest/gtest.h>
#include <signal.h>
#include <torch/torch.h>
#include <unistd.h>

#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

using Lifecycle = testing::FolderTest<2, 6>;  // 12 samples

TEST_F(Lifecycle, NoProcessFdOrMappingSurvivesTheLoader) {
  const int fds_before = testing::count_ringloader_fds();
  const int maps_before = testing::count_ringloader_mappings();
  std::vector<int> pids;
  {
    Loader loader(dataset_, Pipeline{CenterCrop(8)}, options(4, 2));
    pids = loader.worker_pids();
    ASSERT_EQ(pids.size(), 2u);
    for (int pid : pids) EXPECT_TRUE(testing::process_alive(pid));
    EXPECT_GT(testing::count_ringloader_mappings(), maps_before);
    for (Batch& batch : loader) (void)batch;
    // Leave mid-epoch with batches in flight.
    auto it = loader.begin();
    (void)it;
  }
  for (int pid : pids) EXPECT_FALSE(testing::process_alive(pid)) << pid;
  EXPECT_EQ(testing::count_ringloader_fds(), fds_before);
  EXPECT_EQ(testing::count_ringloader_mappings(), maps_before);
}

TEST_F(Lifecycle, AConstructionThatThrowsAfterSpawningLeavesNothing) {
  // The start-timeout variable is read after the ring, the configuration
  // memfd and the workers exist: its error must take all of them down.
  const int fds_before = testing::count_ringloader_fds();
  const int maps_before = testing::count_ringloader_mappings();
  ASSERT_EQ(setenv("RINGLOADER_WORKER_START_TIMEOUT_S", "-1", 1), 0);
  EXPECT_THROW(Loader(dataset_, Pipeline{CenterCrop(8)}, options(4, 2)), OptionError);
  unsetenv("RINGLOADER_WORKER_START_TIMEOUT_S");
  EXPECT_EQ(testing::count_ringloader_fds(), fds_before);
  EXPECT_EQ(testing::count_ringloader_mappings(), maps_before);
}

long resident_kib() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int count_fds() {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++count;
  }
  return count;
}

TEST_F(Lifecycle, HundredConstructionsLeakNoFdMappingProcessOrMemory) {
  auto cycle = [&](int workers) {
    Loader loader(dataset_, Pipeline{CenterCrop(8)}, options(3, workers));
    auto it = loader.begin();
    EXPECT_EQ(it->data.size(0), 3);
  };
  for (int i = 0; i < 5; ++i) cycle(i % 2);  // allocator and TBB warm-up
  const int fds_before = count_fds();
  // The dataset's own sample table (a memfd it holds for its life) is
  // counted before and after alike.
  const int memfds_before = testing::count_ringloader_fds();
  const int mappings_before = testing::count_ringloader_mappings();
  const long rss_before = resident_kib();
  for (int i = 0; i < 100; ++i) cycle(i % 3);  // 0, 1 and 2 workers
  EXPECT_EQ(count_fds(), fds_before);
  EXPECT_EQ(testing::count_ringloader_fds(), memfds_before);
  EXPECT_EQ(testing::count_ringloader_mappings(), mappings_before);
  EXPECT_LE(memfds_before, 1);  // the table, nothing a loader left
  int status = 0;
  EXPECT_EQ(waitpid(-1, &status, WNOHANG), -1) << "a child process is left";
  EXPECT_EQ(errno, ECHILD);
#ifndef __SANITIZE_ADDRESS__
  // (ASan's quarantine keeps freed memory resident on purpose.)
  EXPECT_LT(resident_kib() - rss_before, 8 * 1024) << "RSS grew";
#else
  (void)rss_before;
#endif
}

TEST_F(Lifecycle, BadOptionsFailAtConstruction) {
  auto expect_option_error = [&](LoaderOptions opts, const std::string& word) {
    try {
      Loader loader(dataset_, Pipeline{CenterCrop(8)}, opts);
      FAIL() << "expected OptionError mentioning " << word;
    } catch (const OptionError& error) {
      EXPECT_NE(std::string(error.what()).find(word), std::string::npos)
          << error.what();
    }
  };
  expect_option_error(options(0, 1), "batch_size");
  // (-1 is LoaderOptions::kAutoWorkers.)
  expect_option_error(options(4, -2), "num_workers");
  auto one_slot = options(4, 1);
  one_slot.ring_slots = 1;
  expect_option_error(one_slot, "ring_slots");
  auto no_worker = options(4, 1);
  no_worker.worker_executable = "/nonexistent/ringloader-worker";
  expect_option_error(no_worker, "worker executable");
  // A pipeline whose output size depends on the image.
  EXPECT_THROW(Loader(dataset_, Pipeline{Resize(16)}, options(4, 0)), OptionError);
}

TEST_F(Lifecycle, MissingAndEmptyFoldersAreIoErrors) {
  EXPECT_THROW(Dataset::image_folder(dir_ / "nope"), IoError);
  testing::TempDir empty;
  EXPECT_THROW(Dataset::image_folder(empty.path()), IoError);
  std::string classless = empty / "a";
  ASSERT_EQ(system(("mkdir -p '" + classless + "'").c_str()), 0);
  try {
    Dataset::image_folder(empty.path());
    FAIL();
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find(classless), std::string::npos)
        << error.what();
  }
}

TEST_F(Lifecycle, CorruptFileErrorNamesFileAndSampleInEveryMode) {
  std::string bad = dir_ / "images/class_1/002.png";
  testing::write_file(bad, "\x89PNG\r\n\x1a\nthis is not really a png");
  for (int workers : {0, 2}) {
    Loader loader(Dataset::image_folder(dir_ / "images"), Pipeline{CenterCrop(8)},
                  options(4, workers));
    std::string message;
    int64_t delivered = 0;
    try {
      for (Batch& batch : loader) delivered += batch.data.size(0);
    } catch (const DecodeError& error) {
      message = error.what();
    }
    EXPECT_NE(message.find(bad), std::string::npos) << message;
    EXPECT_NE(message.find("sample 8"), std::string::npos) << message;
    EXPECT_NE(message.find("batch 2"), std::string::npos) << message;
    EXPECT_EQ(delivered, 8) << "batches before the bad one arrive";
  }
}

TEST_F(Lifecycle, UnreadableFileIsAnIoError) {
  if (geteuid() == 0) {
    // root reads anything; a missing file exercises the same path.
  }
  std::string gone = dir_ / "images/class_0/001.png";
  Dataset dataset = Dataset::image_folder(dir_ / "images");
  ASSERT_EQ(unlink(gone.c_str()), 0);
  Loader loader(dataset, Pipeline{CenterCrop(8)}, options(12, 1));
  try {
    loader.begin();
    FAIL() << "expected IoError";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find(gone), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("sample 1"), std::string::npos);
  }
}

TEST_F(Lifecycle, KilledWorkerIsReplacedAndNamedInTheLog) {
  auto opts = options(2, 1);
  opts.poll_interval_s = 0.02;
  ::testing::internal::CaptureStderr();
  int64_t samples = 0;
  int pid = 0;
  std::vector<int> after;
  {
    Loader loader(dataset_, Pipeline{CenterCrop(8)}, opts);
    pid = loader.worker_pids().at(0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (Batch& batch : loader) samples += batch.data.size(0);
    }
    EXPECT_EQ(loader.stats().worker_restarts, 1);
    after = loader.worker_pids();
  }
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(samples, 24);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after[0], pid);
  EXPECT_NE(log.find("worker 0 (pid " + std::to_string(pid) + ") was killed by signal 9"),
            std::string::npos) << log;
  EXPECT_NE(log.find("replaced by pid " + std::to_string(after[0])),
            std::string::npos) << log;
}

}  // namespace
}  // namespace ringloader
