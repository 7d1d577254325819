// SPDX-License-Identifier: BSD-3-Clause
// Worker capacity and the automatic ring depth (loader/trainer/ring_sizing.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include "loader/trainer/ring_sizing.h"

namespace ringloader::trainer {
namespace {

LoaderOptions workers(int count, int max_auto = 0) {
  LoaderOptions options;
  options.num_workers = count;
  options.max_auto_workers = max_auto;
  return options;
}

TEST(RingSizing, WorkerCapacity) {
  EXPECT_EQ(worker_capacity(workers(0)), 1);  // the in-process filler's control
  EXPECT_EQ(worker_capacity(workers(5)), 5);
  EXPECT_EQ(worker_capacity(workers(LoaderOptions::kAutoWorkers, 7)), 7);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_EQ(worker_capacity(workers(LoaderOptions::kAutoWorkers)), cores > 0 ? cores : 1);
}

TEST(RingSizing, TwoPerWorkerAtLeastFour) {
  LoaderOptions options = workers(0);
  options.ring_memory_budget_bytes = uint64_t{1} << 40;
  EXPECT_EQ(automatic_ring_slots(options, 1000), 4);
  options.num_workers = 1;
  EXPECT_EQ(automatic_ring_slots(options, 1000), 4);
  options.num_workers = 2;
  EXPECT_EQ(automatic_ring_slots(options, 1000), 4);
  options.num_workers = 3;
  EXPECT_EQ(automatic_ring_slots(options, 1000), 6);
  options = workers(LoaderOptions::kAutoWorkers, 10);
  options.ring_memory_budget_bytes = uint64_t{1} << 40;
  EXPECT_EQ(automatic_ring_slots(options, 1000), 20);  // the most workers it may reach
}

TEST(RingSizing, BudgetLowersTheDepthToTwoAtLeast) {
  LoaderOptions options = workers(8);  // wants 16
  options.ring_memory_budget_bytes = 10 * 1000;
  EXPECT_EQ(automatic_ring_slots(options, 1000), 10);
  options.ring_memory_budget_bytes = 10 * 1000 - 1;
  EXPECT_EQ(automatic_ring_slots(options, 1000), 9);
  options.ring_memory_budget_bytes = 1;
  EXPECT_EQ(automatic_ring_slots(options, 1000), 2);
  EXPECT_EQ(automatic_ring_slots(options, 0), 16);  // empty slots fit any budget
}

TEST(RingSizing, NoBudgetIsAQuarterOfMemory) {
  const uint64_t quarter = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                           static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 4;
  LoaderOptions options = workers(8);
  EXPECT_EQ(automatic_ring_slots(options, quarter / 5), 5);
  EXPECT_EQ(automatic_ring_slots(options, quarter + 1), 2);
}

}  // namespace
}  // namespace ringloader::trainer
