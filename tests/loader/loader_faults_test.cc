// SPDX-License-Identifier: BSD-3-Clause
// Faults lose nothing: workers killed (SIGKILL, SIGSEGV) or stopped (a hang)
// at random points are replaced, their batches re-done, and every epoch is
// byte-identical to an undisturbed run: every sample exactly once, in order.
// A batch that keeps taking workers down is given up with an error naming
// the worker, the batch, the sample and the file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

struct DeliveredBatch {
  std::vector<int64_t> samples;
  std::string bytes;
};

std::string bytes_of(const torch::Tensor& tensor) {
  torch::Tensor flat = tensor.contiguous();
  return std::string(static_cast<const char*>(flat.data_ptr()), flat.nbytes());
}

Pipeline augmenting_pipeline() {
  return Pipeline{RandomResizedCrop(24), RandomHorizontalFlip(), ToTensor()};
}

class Faults : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "images", 3, 20, "jpg", 64, 160);
    dataset_ = Dataset::image_folder(dir_ / "images");
  }
  LoaderOptions fault_options(int workers) {
    LoaderOptions options = testing::make_options(4, workers);
    options.shuffle = true;
    options.seed = 7;
    options.ring_slots = 3;  // workers often wait for slots: kills hit waits too
    options.poll_interval_s = 0.02;
    options.hang_timeout_s = 0.5;
    options.max_batch_retries = 3;
    return options;
  }
  // One epoch; `disturb(batch_index, loader)` runs before each next().
  template <typename Disturb>
  std::vector<DeliveredBatch> epoch(Loader& loader, int64_t epoch_index,
                                    Disturb disturb) {
    std::vector<DeliveredBatch> out;
    loader.set_epoch(epoch_index);
    loader.begin_epoch();
    for (int64_t i = 0;; ++i) {
      disturb(i, loader);
      std::optional<Batch> batch = loader.next();
      if (!batch) break;
      out.push_back({batch->sample_indices, bytes_of(batch->data)});
    }
    return out;
  }
  testing::TempDir dir_;
  Dataset dataset_;
};

void expect_same_epoch(const std::vector<DeliveredBatch>& expected,
                       const std::vector<DeliveredBatch>& got, int64_t samples) {
  ASSERT_EQ(got.size(), expected.size());
  std::multiset<int64_t> seen;
  for (size_t b = 0; b < expected.size(); ++b) {
    EXPECT_EQ(got[b].samples, expected[b].samples) << "batch " << b;
    EXPECT_TRUE(got[b].bytes == expected[b].bytes) << "batch " << b << " bytes differ";
    seen.insert(got[b].samples.begin(), got[b].samples.end());
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), samples);
  EXPECT_EQ(static_cast<int64_t>(std::set<int64_t>(seen.begin(), seen.end()).size()),
            samples)
      << "a sample was lost or duplicated";
}

TEST_F(Faults, KilledAndStoppedWorkersAtRandomPointsLoseNothing) {
  std::vector<std::vector<DeliveredBatch>> reference;
  {
    Loader undisturbed(dataset_, augmenting_pipeline(), fault_options(0));
    for (int e = 0; e < 3; ++e) {
      reference.push_back(epoch(undisturbed, e, [](int64_t, Loader&) {}));
    }
  }
  Loader loader(dataset_, augmenting_pipeline(), fault_options(3));
  std::mt19937 random(20261123);  // fixed: the same faults every run
  const int signals[] = {SIGKILL, SIGSEGV, SIGSTOP};
  int injected = 0;
  std::set<int> hit;  // a pid may be hit twice before the trainer reaps it
  for (int e = 0; e < 3; ++e) {
    auto disturb = [&](int64_t, Loader& l) {
      if (random() % 3 != 0) return;
      std::vector<int> pids = l.worker_pids();
      int pid = pids[random() % pids.size()];
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 3000));
      ASSERT_EQ(kill(pid, signals[random() % 3]), 0);
      ++injected;
      hit.insert(pid);
    };
    expect_same_epoch(reference[e], epoch(loader, e, disturb), 60);
  }
  LoaderStats stats = loader.stats();
  EXPECT_GE(hit.size(), 5u);
  // A fault injected after a worker's last batch of the run is noticed
  // only at the next wait: up to one per worker may still be pending.
  EXPECT_GE(stats.worker_restarts, static_cast<int64_t>(hit.size()) - 3)
      << stats.to_string();
  EXPECT_GE(stats.redone_batches, 1) << stats.to_string();
  std::cout << "faults injected " << injected << " into " << hit.size()
            << " worker processes, workers replaced "
            << stats.worker_restarts << ", batches re-done " << stats.redone_batches
            << ", samples lost 0\n";
}

TEST_F(Faults, HungReadIsKilledRetriedThenNamedWithItsFile) {
  // A FIFO with no writer: open() blocks forever, like a dead network mount.
  std::string fifo = dir_ / "stuck.png";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::vector<FileSample> files;
  for (int i = 0; i < 12; ++i) files.push_back({dataset_.files()[i].path, 0});
  files[6] = {fifo, 0};
  auto options = fault_options(2);
  options.shuffle = false;
  options.hang_timeout_s = 0.3;
  options.max_batch_retries = 1;
  Loader loader(Dataset::file_list(files), Pipeline{CenterCrop(16)}, options);
  loader.begin_epoch();
  EXPECT_EQ(loader.next()->sample_indices, (std::vector<int64_t>{0, 1, 2, 3}));
  try {
    loader.next();
    FAIL() << "expected WorkerError";
  } catch (const WorkerError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("hung"), std::string::npos) << message;
    EXPECT_NE(message.find("sample 6"), std::string::npos) << message;
    EXPECT_NE(message.find(fifo), std::string::npos) << message;
    EXPECT_NE(message.find("batch 1 of epoch 0"), std::string::npos) << message;
    EXPECT_NE(message.find("2 workers"), std::string::npos) << message;
  }
  // The loader goes on after the given-up batch.
  EXPECT_EQ(loader.next()->sample_indices, (std::vector<int64_t>{8, 9, 10, 11}));
  EXPECT_FALSE(loader.next().has_value());
  // Two lost on the FIFO; a loaded machine may stall a healthy one too.
  EXPECT_GE(loader.stats().worker_restarts, 2);
}

TEST_F(Faults, HangTimeoutZeroNeverKills) {
  auto options = fault_options(1);
  options.hang_timeout_s = 0;
  Loader loader(dataset_, Pipeline{CenterCrop(16)}, options);
  int pid = loader.worker_pids().at(0);
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  int64_t batches = 0;
  for (Batch& batch : loader) batches += batch.data.size(0) > 0;
  EXPECT_EQ(batches, 15);
  EXPECT_EQ(loader.stats().worker_restarts, 0);
  EXPECT_EQ(loader.worker_pids().at(0), pid);
}

TEST_F(Faults, WorkerThatCannotStartIsAnErrorNotARespawnLoop) {
  auto options = fault_options(1);
  options.worker_executable = "/bin/false";
  Loader loader(dataset_, Pipeline{CenterCrop(16)}, options);
  try {
    for (Batch& batch : loader) (void)batch;
    FAIL() << "expected WorkerError";
  } catch (const WorkerError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("exited with status 1"), std::string::npos) << message;
    EXPECT_NE(message.find("before it started"), std::string::npos) << message;
  }
}

TEST_F(Faults, WorkerThatNeverAttachesIsJudgedHungNotWaitedOnForever) {
  // Stuck before it reaches the ring, like a forked Python worker that
  // inherited a held lock: it has no heartbeat, so only its start is judged.
  std::string stuck = dir_ / "stuck-worker.sh";
  {
    std::ofstream script(stuck);
    script << "#!/bin/sh\nexec sleep 3600\n";
  }
  ASSERT_EQ(chmod(stuck.c_str(), 0700), 0);
  ASSERT_EQ(setenv("RINGLOADER_WORKER_START_TIMEOUT_S", "0.3", 1), 0);
  auto options = fault_options(1);
  options.worker_executable = stuck;
  options.hang_timeout_s = 0.1;
  const auto start = std::chrono::steady_clock::now();
  try {
    Loader loader(dataset_, Pipeline{CenterCrop(16)}, options);
    for (Batch& batch : loader) (void)batch;
    ADD_FAILURE() << "expected WorkerError";
  } catch (const WorkerError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("did not attach to the ring in"), std::string::npos) << message;
    EXPECT_NE(message.find("RINGLOADER_WORKER_START_TIMEOUT_S"), std::string::npos) << message;
    EXPECT_NE(message.find("without finishing a batch"), std::string::npos) << message;
  }
  unsetenv("RINGLOADER_WORKER_START_TIMEOUT_S");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST_F(Faults, WorkerStartTimeoutMustBeANumber) {
  ASSERT_EQ(setenv("RINGLOADER_WORKER_START_TIMEOUT_S", "soon", 1), 0);
  EXPECT_THROW(Loader(dataset_, Pipeline{CenterCrop(16)}, fault_options(1)), OptionError);
  unsetenv("RINGLOADER_WORKER_START_TIMEOUT_S");
}

TEST_F(Faults, BadFaultOptionsFailAtConstruction) {
  auto options = fault_options(1);
  options.hang_timeout_s = -1;
  EXPECT_THROW(Loader(dataset_, Pipeline{CenterCrop(16)}, options), OptionError);
  options = fault_options(1);
  options.max_batch_retries = -1;
  EXPECT_THROW(Loader(dataset_, Pipeline{CenterCrop(16)}, options), OptionError);
}

}  // namespace
}  // namespace ringloader
