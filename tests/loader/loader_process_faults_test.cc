// SPDX-License-Identifier: BSD-3-Clause
// Process-level faults that a careful read found (issue 18): a worker that
// cannot be replaced, a worker killed between its last write and its
// publish, a trainer that forks, worker deaths a host program hides, and
// descriptors that leak. Each would hang the trainer or corrupt a batch;
// each test runs with a timeout_s, so a regression fails instead of hanging.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "ringloader/external.h"
#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

class ProcessFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "images", 3, 20, "png", 24, 40);
    dataset_ = Dataset::image_folder(dir_ / "images");
  }
  LoaderOptions options(int workers) {
    LoaderOptions out = testing::make_options(4, workers);
    out.ring_slots = 3;
    out.poll_interval_s = 0.02;
    out.hang_timeout_s = 5;
    out.timeout_s = 10;  // a hang fails the test with "timed out"
    return out;
  }
  // Every sample of one epoch, as delivered (index -> bytes). `raw_bytes`:
  // an external loader's flat slot, that many bytes a sample.
  static std::map<int64_t, std::string> samples_of(Loader& loader,
                                                   std::optional<Batch> first = {},
                                                   int64_t raw_bytes = 0) {
    std::map<int64_t, std::string> out;
    auto add = [&out, raw_bytes](const Batch& batch) {
      torch::Tensor data = batch.data.contiguous();
      const int64_t each =
          raw_bytes > 0 ? raw_bytes : data.nbytes() / std::max<int64_t>(1, data.size(0));
      for (size_t i = 0; i < batch.sample_indices.size(); ++i) {
        EXPECT_TRUE(out.count(batch.sample_indices[i]) == 0)
            << "sample " << batch.sample_indices[i] << " delivered twice";
        out[batch.sample_indices[i]] = std::string(
            static_cast<const char*>(data.data_ptr()) + i * each, each);
      }
    };
    if (first) add(*first);
    while (std::optional<Batch> batch = loader.next()) add(*batch);
    return out;
  }
  // Blocks until the test worker ($RINGLOADER_TEST_WORKER_MARK_DIR = dir_)
  // holds `batch_id`: a test that abandons an epoch "while a batch is being
  // filled" must not race the worker's claim (lost under ASan in CI).
  void wait_until_filling(uint64_t batch_id) {
    const std::string mark = dir_ / ("filling-" + std::to_string(batch_id));
    struct stat info {};
    for (int tries = 0; tries < 1000 && stat(mark.c_str(), &info) != 0; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(stat(mark.c_str(), &info), 0) << "the worker never took batch " << batch_id;
  }
  testing::TempDir dir_;
  Dataset dataset_;
};

// Item 1: two workers that cannot start die before the first check; the
// first one's error must not leave the second unhandled, and a second and
// third loop must raise (no live worker) instead of waiting forever.
TEST_F(ProcessFaults, NoLiveWorkerIsAnErrorOnEveryLoopNotAHang) {
  auto opts = options(2);
  opts.worker_executable = "/bin/false";
  opts.timeout_s = 3;
  Loader loader(dataset_, Pipeline{CenterCrop(16)}, opts);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both exited
  for (int loop = 0; loop < 3; ++loop) {
    SCOPED_TRACE("loop " + std::to_string(loop));
    const auto start = std::chrono::steady_clock::now();
    try {
      for (Batch& batch : loader) (void)batch;
      ADD_FAILURE() << "expected WorkerError";
    } catch (const WorkerError& error) {
      std::string message = error.what();
      EXPECT_EQ(message.find("timed out"), std::string::npos) << message;
      EXPECT_NE(message.find("before it started"), std::string::npos) << message;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  }
}

// Item 2: an external (Python-style) worker SIGKILLed after it wrote its
// batch but before it published it. Its claim must still name the batch,
// so the batch is re-done; else the slot stays FILLING and the trainer
// waits forever.
TEST_F(ProcessFaults, ExternalWorkerKilledJustBeforePublishLosesNothing) {
  const std::string marker = dir_ / "killed";
  ASSERT_EQ(setenv("RINGLOADER_FAULT_KILL_AT",
                   ("endpoint.before_publish:" + marker).c_str(), 1), 0);
  ExternalWorkers workers;
  workers.command = {testing::sibling_executable("ringloader_test_external_worker")};
  workers.config = "8";
  workers.dataset_size = 24;
  workers.sample_bytes = 8;
  auto opts = options(2);
  opts.timeout_s = 5;
  Loader loader(workers, opts);
  unsetenv("RINGLOADER_FAULT_KILL_AT");
  loader.begin_epoch();
  std::map<int64_t, std::string> got = samples_of(loader, std::nullopt, 8);
  struct stat info {};
  ASSERT_EQ(stat(marker.c_str(), &info), 0) << "the fault point was never reached";
  ASSERT_EQ(got.size(), 24u);
  for (const auto& [index, bytes] : got) {
    EXPECT_EQ(bytes, std::string(8, static_cast<char>(index % 251))) << "sample " << index;
  }
  EXPECT_GE(loader.stats().worker_restarts, 1);
}

// Soak finding: a worker killed after it published a batch of an abandoned
// epoch but before it moved the slot on left that slot parked on a dead id;
// the next epoch's batch for that slot then never came (every worker idle).
TEST_F(ProcessFaults, WorkerKilledPublishingAnAbandonedBatchLeavesNoParkedSlot) {
  const std::string marker = dir_ / "killed";
  ASSERT_EQ(setenv("RINGLOADER_FAULT_KILL_AT",
                   ("publish.cancelled_before_advance:" + marker).c_str(), 1), 0);
  ASSERT_EQ(setenv("RINGLOADER_TEST_WORKER_DELAY_MS", "300", 1), 0);
  ASSERT_EQ(setenv("RINGLOADER_TEST_WORKER_MARK_DIR", dir_.path().c_str(), 1), 0);
  ExternalWorkers workers;
  workers.command = {testing::sibling_executable("ringloader_test_external_worker")};
  workers.config = "8";
  workers.dataset_size = 16;
  workers.sample_bytes = 8;
  auto opts = options(1);
  opts.ring_slots = 2;
  opts.timeout_s = 8;
  Loader loader(workers, opts);
  loader.begin_epoch();
  // Batch 0 arrives after one delay; the worker is then inside batch 1's
  // delay when the epoch is abandoned, and publishes it cancelled.
  ASSERT_TRUE(loader.next().has_value());
  wait_until_filling(1);
  loader.begin_epoch();
  unsetenv("RINGLOADER_TEST_WORKER_DELAY_MS");
  unsetenv("RINGLOADER_TEST_WORKER_MARK_DIR");
  unsetenv("RINGLOADER_FAULT_KILL_AT");
  std::map<int64_t, std::string> got = samples_of(loader, std::nullopt, 8);
  struct stat info {};
  ASSERT_EQ(stat(marker.c_str(), &info), 0) << "the fault point was never reached";
  EXPECT_EQ(got.size(), 16u);
  EXPECT_GE(loader.stats().worker_restarts, 1);
}

// Issue 31 (the soak's stalls after a `break`): a worker killed (or hung
// and killed) while it filled a batch of an abandoned epoch left that slot
// FILLING for a cancelled id. Recovery re-does no cancelled batch, and
// cancellation moves only FREE, READY and FAILED slots, so the slot stayed
// FILLING and the new epoch's batch for it never came (timed out before the
// fix).
TEST_F(ProcessFaults, WorkerKilledFillingAnAbandonedBatchLeavesNoStuckSlot) {
  const std::string marker = dir_ / "killed";
  ASSERT_EQ(close(open(marker.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)), 0);
  ASSERT_EQ(setenv("RINGLOADER_FAULT_KILL_AT",
                   ("endpoint.before_publish:" + marker).c_str(), 1), 0);
  ASSERT_EQ(setenv("RINGLOADER_TEST_WORKER_DELAY_MS", "500", 1), 0);
  ASSERT_EQ(setenv("RINGLOADER_TEST_WORKER_MARK_DIR", dir_.path().c_str(), 1), 0);
  ExternalWorkers workers;
  workers.command = {testing::sibling_executable("ringloader_test_external_worker")};
  workers.config = "8";
  workers.dataset_size = 16;
  workers.sample_bytes = 8;
  auto opts = options(1);
  opts.ring_slots = 2;
  opts.timeout_s = 8;
  Loader loader(workers, opts);
  loader.begin_epoch();
  // Batch 0 arrives after one delay; the worker is then 500 ms into batch 1.
  // The marker goes (the fault is armed: batch 1's publish dies) and the
  // epoch is abandoned, which cancels batch 1 in the middle of its fill.
  ASSERT_TRUE(loader.next().has_value());
  wait_until_filling(1);
  ASSERT_EQ(unlink(marker.c_str()), 0);
  loader.begin_epoch();
  unsetenv("RINGLOADER_TEST_WORKER_DELAY_MS");
  unsetenv("RINGLOADER_TEST_WORKER_MARK_DIR");
  unsetenv("RINGLOADER_FAULT_KILL_AT");
  std::map<int64_t, std::string> got = samples_of(loader, std::nullopt, 8);
  struct stat info {};
  ASSERT_EQ(stat(marker.c_str(), &info), 0) << "the fault point was never reached";
  EXPECT_EQ(got.size(), 16u);
  for (const auto& [index, bytes] : got) {
    EXPECT_EQ(bytes, std::string(8, static_cast<char>(index % 251))) << "sample " << index;
  }
  EXPECT_GE(loader.stats().worker_restarts, 1);
}

// Sends SIGCONT to `pids` 0.5 s after `marker` appears (the fault point's
// SIGSTOP), far inside hang_timeout_s.
std::thread continue_later(const std::string& marker, std::vector<int> pids) {
  return std::thread([marker, pids] {
    struct stat info {};
    for (int tries = 0; tries < 500 && stat(marker.c_str(), &info) != 0; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    for (int pid : pids) kill(pid, SIGCONT);
  });
}

std::string stop_at(const std::string& point, const std::string& marker) {
  return point + ":" + std::to_string(SIGSTOP) + ":" + marker;
}

// Soak finding (issue 31): a worker that set `ready` before its first
// heartbeat, and was descheduled there, was judged against a heartbeat of
// 0, "no progress for <uptime> ms", and killed as hung at once. Here the
// worker stops itself right after `ready` and is continued 0.5 s later,
// far inside hang_timeout_s: it must be kept (restarted and killed before
// the fix).
TEST_F(ProcessFaults, AWorkerPausedRightAfterStartingIsNotKilledAsHung) {
  const std::string marker = dir_ / "stopped";
  ASSERT_EQ(setenv("RINGLOADER_FAULT_SIGNAL_AT", stop_at("worker.ready", marker).c_str(), 1), 0);
  Loader loader(dataset_, Pipeline{CenterCrop(16)}, options(1));
  unsetenv("RINGLOADER_FAULT_SIGNAL_AT");
  std::thread resume = continue_later(marker, loader.worker_pids());
  loader.begin_epoch();
  std::map<int64_t, std::string> got = samples_of(loader);
  resume.join();
  struct stat info {};
  ASSERT_EQ(stat(marker.c_str(), &info), 0) << "the fault point was never reached";
  EXPECT_EQ(got.size(), 60u);
  EXPECT_EQ(loader.stats().worker_restarts, 0);
}

// The same window in an external (Python) worker's endpoint.
TEST_F(ProcessFaults, AnExternalWorkerPausedRightAfterStartingIsNotKilledAsHung) {
  const std::string marker = dir_ / "stopped";
  ASSERT_EQ(setenv("RINGLOADER_FAULT_SIGNAL_AT", stop_at("endpoint.ready", marker).c_str(), 1),
            0);
  ExternalWorkers workers;
  workers.command = {testing::sibling_executable("ringloader_test_external_worker")};
  workers.config = "8";
  workers.dataset_size = 24;
  workers.sample_bytes = 8;
  Loader loader(workers, options(1));
  unsetenv("RINGLOADER_FAULT_SIGNAL_AT");
  std::thread resume = continue_later(marker, loader.worker_pids());
  loader.begin_epoch();
  std::map<int64_t, std::string> got = samples_of(loader, std::nullopt, 8);
  resume.join();
  struct stat info {};
  ASSERT_EQ(stat(marker.c_str(), &info), 0) << "the fault point was never reached";
  EXPECT_EQ(got.size(), 24u);
  EXPECT_EQ(loader.stats().worker_restarts, 0);
}

std::string bytes_of(const torch::Tensor& tensor) {
  torch::Tensor flat = tensor.contiguous();
  return std::string(static_cast<const char*>(flat.data_ptr()), flat.nbytes());
}

// Item 3: a child forked by the trainer that drops its copies of a batch
// and of the Loader, then exits, touches nothing the parent shares: the
// parent's workers go on (no shutdown flag), and the batch the parent holds
// is not overwritten (the child's lease does not free its slot).
TEST_F(ProcessFaults, ForkedChildThatDropsBatchAndLoaderLeavesTheParentAlone) {
  std::map<int64_t, std::string> reference;
  {
    Loader undisturbed(dataset_, Pipeline{CenterCrop(16), ToTensor()}, options(0));
    undisturbed.begin_epoch();
    reference = samples_of(undisturbed);
  }
  auto loader = std::make_unique<Loader>(dataset_, Pipeline{CenterCrop(16), ToTensor()},
                                         options(2));
  loader->begin_epoch();
  std::optional<Batch> held = loader->next();
  ASSERT_TRUE(held.has_value());
  const std::string held_bytes = bytes_of(held->data);
  const std::vector<int> pids = loader->worker_pids();
  std::fflush(nullptr);  // the child must not print the parent's buffered output
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    held.reset();    // the child's copy of the lease
    loader.reset();  // the child's copy of the Loader: its destructor
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::map<int64_t, std::string> rest = samples_of(*loader);
  EXPECT_EQ(bytes_of(held->data), held_bytes) << "the held batch was overwritten";
  for (size_t i = 0; i < held->sample_indices.size(); ++i) {
    rest[held->sample_indices[i]] =
        held_bytes.substr(i * held_bytes.size() / held->sample_indices.size(),
                          held_bytes.size() / held->sample_indices.size());
  }
  EXPECT_TRUE(rest == reference) << "the epoch differs from an undisturbed one";
  EXPECT_EQ(loader->stats().worker_restarts, 0);
  EXPECT_EQ(loader->worker_pids(), pids);
}

// Item 3: the trainer's ring and config memfds are close-on-exec, so a
// program the trainer execs (or a subprocess) never holds the ring.
TEST_F(ProcessFaults, TrainerRingDescriptorsAreCloseOnExec) {
  Loader loader(dataset_, Pipeline{CenterCrop(16)}, options(1));
  int seen = 0;
  DIR* dir = opendir("/proc/self/fd");
  ASSERT_NE(dir, nullptr);
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    char target[512] = {};
    std::string link = std::string("/proc/self/fd/") + entry->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) <= 0) continue;
    if (std::string(target).find("memfd:ringloader") == std::string::npos) continue;
    ++seen;
    int flags = fcntl(std::atoi(entry->d_name), F_GETFD);
    EXPECT_TRUE(flags >= 0 && (flags & FD_CLOEXEC)) << target << " on fd " << entry->d_name;
  }
  closedir(dir);
  EXPECT_GE(seen, 2);  // ring and configuration, and the pool's copies
}

// Item 5: a host program that ignores SIGCHLD (children are reaped by the
// kernel) or reaps every child itself must not hide a worker's death.
class HiddenDeaths : public ProcessFaults {
 protected:
  void kill_one_worker_mid_epoch() {
    Loader loader(dataset_, Pipeline{CenterCrop(16), ToTensor()}, options(2));
    loader.begin_epoch();
    std::optional<Batch> first = loader.next();
    ASSERT_TRUE(first.has_value());
    const int victim = loader.worker_pids().at(0);
    ASSERT_EQ(kill(victim, SIGKILL), 0);
    // The victim is surely gone after this; a trainer that never has to
    // wait for a batch (the other worker keeps up) must still see it.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(samples_of(loader, std::move(first)).size(), 60u);
    loader.begin_epoch();
    EXPECT_EQ(samples_of(loader).size(), 60u);
    EXPECT_GE(loader.stats().worker_restarts, 1);
    std::vector<int> pids = loader.worker_pids();
    EXPECT_EQ(pids.size(), 2u);
    EXPECT_EQ(std::count(pids.begin(), pids.end(), victim), 0);
  }
};

TEST_F(HiddenDeaths, WorkerDeathIsSeenWithSigchldIgnored) {
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGCHLD, &ignore, &previous), 0);
  kill_one_worker_mid_epoch();
  sigaction(SIGCHLD, &previous, nullptr);
}

TEST_F(HiddenDeaths, WorkerDeathIsSeenWhenTheHostReapsEveryChild) {
  std::atomic<bool> stop{false};
  std::thread reaper([&stop] {  // a launcher's waitpid(-1) loop
    while (!stop.load()) {
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  kill_one_worker_mid_epoch();
  stop = true;
  reaper.join();
}

}  // namespace
}  // namespace ringloader
