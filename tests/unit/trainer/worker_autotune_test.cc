// SPDX-License-Identifier: BSD-3-Clause
// The autotuner's policy on synthetic windows: it adds workers while the
// trainer stalls and cores are idle, skips the window a new worker starts
// in, settles once a worker adds less than min_gain, and stops at the most
// workers allowed; it says why once per change. A worker that did not pay
// is retired again.
#include <gtest/gtest.h>

#include <string>

#include "loader/trainer/worker_autotune.h"

namespace ringloader::trainer {
namespace {

AutotuneWindow window(double samples_per_s, double stall, double idle_cores) {
  AutotuneWindow w;
  w.seconds = 1.0;
  w.batches = 10;
  w.samples = static_cast<int64_t>(samples_per_s);
  w.trainer_wait_s = stall;
  w.idle_cores = idle_cores;
  return w;
}

using Action = AutotunePolicy::Action;

AutotuneOptions options(int max_workers) {
  AutotuneOptions o;
  o.max_workers = max_workers;
  return o;
}

TEST(AutotunePolicy, AddsWhileItPaysThenSettles) {
  AutotunePolicy policy(options(8));
  std::string why;
  EXPECT_EQ(policy.decide(window(100, 0.6, 3.0), 1, why), Action::kAdd);
  EXPECT_NE(why.find("1 -> 2 workers"), std::string::npos) << why;
  // The window the new worker starts in is not judged.
  EXPECT_EQ(policy.decide(window(50, 0.9, 3.0), 2, why), Action::kKeep);
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(policy.decide(window(190, 0.3, 2.0), 2, why), Action::kAdd);  // +90%
  EXPECT_EQ(policy.decide(window(190, 0.3, 2.0), 3, why), Action::kKeep);
  // The third worker added 5%: it goes again, settled at 2.
  EXPECT_EQ(policy.decide(window(200, 0.25, 1.0), 3, why), Action::kRetire);
  EXPECT_NE(why.find("back to 2 workers"), std::string::npos) << why;
  EXPECT_TRUE(policy.settled());
  EXPECT_EQ(policy.decide(window(10, 0.9, 4.0), 3, why), Action::kKeep);
  EXPECT_TRUE(why.empty());
}

TEST(AutotunePolicy, KeepsWhenTheTrainerIsTheBottleneck) {
  AutotunePolicy policy(options(8));
  std::string why;
  EXPECT_EQ(policy.decide(window(100, 0.02, 3.0), 1, why), Action::kKeep);
  EXPECT_NE(why.find("trainer-bound"), std::string::npos) << why;
  // Same reason again: nothing new to say.
  EXPECT_EQ(policy.decide(window(101, 0.03, 3.0), 1, why), Action::kKeep);
  EXPECT_TRUE(why.empty());
  EXPECT_FALSE(policy.settled());
  // The trainer speeds up and now waits: a worker is added after all.
  EXPECT_EQ(policy.decide(window(150, 0.5, 3.0), 1, why), Action::kAdd);
}

TEST(AutotunePolicy, NoIdleCoreNoWorker) {
  AutotunePolicy policy(options(8));
  std::string why;
  EXPECT_EQ(policy.decide(window(100, 0.5, 0.2), 2, why), Action::kKeep);
  EXPECT_NE(why.find("idle cores"), std::string::npos) << why;
}

TEST(AutotunePolicy, StopsAtTheMostWorkersAllowed) {
  AutotunePolicy policy(options(2));
  std::string why;
  EXPECT_EQ(policy.decide(window(100, 0.6, 3.0), 1, why), Action::kAdd);
  EXPECT_EQ(policy.decide(window(100, 0.6, 3.0), 2, why), Action::kKeep);  // warming
  EXPECT_EQ(policy.decide(window(200, 0.4, 3.0), 2, why), Action::kSettle);
  EXPECT_NE(why.find("most workers allowed (2"), std::string::npos) << why;
}

TEST(WorkerAutotune, CallsAddAndRecordsDecisions) {
  AutotuneOptions o = options(3);
  o.window_s = 0;  // every window_batches batches
  o.window_batches = 2;
  int workers = 1;
  WorkerAutotune tune(o, [&] { ++workers; }, [&] { --workers; }, [&] { return workers; });
  // A trainer that only waits: every window is all stall.
  uint64_t waited = 0;
  for (int batch = 0; batch < 40 && workers < 3; ++batch) {
    waited += 50'000'000;
    tune.on_batch(4, waited);
  }
  // Whether cores are idle depends on the machine; with them, it added.
  for (const std::string& decision : tune.decisions()) {
    EXPECT_EQ(decision.rfind("batch ", 0), 0u) << decision;
  }
  EXPECT_GE(workers, 1);
  EXPECT_LE(workers, 3);
}

}  // namespace
}  // namespace ringloader::trainer
