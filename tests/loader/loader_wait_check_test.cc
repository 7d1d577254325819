// SPDX-License-Identifier: BSD-3-Clause
// Loader::next(check): a wait for a batch can be broken off (Ctrl-C in the
// Python binding) without losing the awaited batch or breaking the epoch.
#include <gtest/gtest.h>
#include <signal.h>
#include <torch/torch.h>

#include <chrono>
#include <stdexcept>
#include <vector>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

using WaitCheckTest = testing::FolderTest<2, 9>;

std::vector<torch::Tensor> rest_of_epoch(Loader& loader) {
  std::vector<torch::Tensor> out;
  while (std::optional<Batch> batch = loader.next()) out.push_back(batch->data.clone());
  return out;
}

void signal_all(const std::vector<int>& pids, int sig) {
  for (int pid : pids) ::kill(pid, sig);
}

TEST_F(WaitCheckTest, ThrowingCheckEndsTheWaitAndKeepsTheBatch) {
  Loader reference_loader(dataset_, Pipeline{CenterCrop(16)}, options(3, 1));
  reference_loader.begin_epoch();
  std::vector<torch::Tensor> reference = rest_of_epoch(reference_loader);
  ASSERT_EQ(reference.size(), 6u);

  LoaderOptions opts = options(3, 2);
  opts.timeout_s = 20;  // a regression fails instead of hanging
  Loader loader(dataset_, Pipeline{CenterCrop(16)}, opts);
  std::vector<int> pids = loader.worker_pids();
  signal_all(pids, SIGSTOP);  // the first batch cannot come
  loader.begin_epoch();
  int calls = 0;
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(loader.next([&calls] {
    if (++calls == 5) throw Interrupted();
  }), Interrupted);
  double waited = std::chrono::duration<double>(
      std::chrono::steady_clock::now() - start).count();
  signal_all(pids, SIGCONT);
  EXPECT_EQ(calls, 5);
  // Five checks, about kWaitCheckInterval_s apart.
  EXPECT_GE(waited, 4 * Loader::kWaitCheckInterval_s);
  EXPECT_LT(waited, 1.0);

  // The same epoch goes on with the awaited batch: none lost or repeated.
  std::vector<torch::Tensor> got = rest_of_epoch(loader);
  ASSERT_EQ(got.size(), reference.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], reference[i])) << i;
}

TEST_F(WaitCheckTest, InterruptedEpochCanBeAbandonedForANewOne) {
  LoaderOptions opts = options(3, 2);
  opts.timeout_s = 20;
  Loader loader(dataset_, Pipeline{CenterCrop(16)}, opts);
  std::vector<int> pids = loader.worker_pids();
  signal_all(pids, SIGSTOP);
  loader.set_epoch(0);
  loader.begin_epoch();
  EXPECT_THROW(loader.next([] { throw Interrupted(); }), Interrupted);
  signal_all(pids, SIGCONT);
  loader.set_epoch(0);
  loader.begin_epoch();
  std::vector<torch::Tensor> got = rest_of_epoch(loader);

  Loader reference_loader(dataset_, Pipeline{CenterCrop(16)}, options(3, 1));
  reference_loader.begin_epoch();
  std::vector<torch::Tensor> reference = rest_of_epoch(reference_loader);
  ASSERT_EQ(got.size(), reference.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], reference[i])) << i;
}

}  // namespace
}  // namespace ringloader
