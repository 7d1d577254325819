// SPDX-License-Identifier: BSD-3-Clause
// The node loader with host lanes, node and trainers in one process (the
// attach socket and the fences do not care): each lane's batches against a
// plain Loader over the node's order, epochs, refusals, the lane given back
// when the last batch dies, and a stopped node. Process deaths are tested
// from Python (python/tests/test_node_loader.py).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

using NodeTest = testing::FolderTest<3, 7>;  // 21 samples

std::string unique_name(const std::string& what) {
  return "test-" + what + "-" + std::to_string(getpid());
}

NodeOptions node_options(const std::string& name, int trainers) {
  NodeOptions node;
  node.name = name;
  node.trainers = trainers;
  node.lane_slots = 2;
  return node;
}

AttachOptions lane(int trainer) {
  AttachOptions options;
  options.trainer = trainer;
  options.connect_timeout_s = 10;
  return options;
}

// The node's epoch order: one rank's order, wrapped to whole rounds.
std::vector<int64_t> padded_order(int64_t size, const LoaderOptions& options, int trainers,
                                  int64_t epoch) {
  LoaderOptions one = options;
  one.rank = 0;
  one.world_size = 1;
  std::vector<int64_t> order = epoch_order(size, one, epoch);
  const int64_t round = options.batch_size * trainers;
  const size_t wanted = static_cast<size_t>((size + round - 1) / round * round);
  for (size_t i = order.size(); i < wanted; ++i) order.push_back(order[i % size]);
  return order;
}

// The node's own view of a trainer's host batch: node and trainer share
// this process, so /proc/self/maps shows the trainer's private mapping of
// the ring (rw-p) and the node's shared one (rw-s) of the same memfd.
torch::Tensor node_view(const torch::Tensor& batch) {
  struct Line {
    uintptr_t start = 0, end = 0;
    uint64_t offset = 0, inode = 0;
    char perms[5] = {};
  };
  std::vector<Line> lines;
  std::ifstream maps("/proc/self/maps");
  for (std::string text; std::getline(maps, text);) {
    Line line;
    if (std::sscanf(text.c_str(), "%lx-%lx %4s %lx %*s %lu", &line.start, &line.end,
                    line.perms, &line.offset, &line.inode) == 5) {
      lines.push_back(line);
    }
  }
  const auto at = reinterpret_cast<uintptr_t>(batch.data_ptr());
  for (const Line& mine : lines) {
    if (at < mine.start || at >= mine.end) continue;
    EXPECT_STREQ(mine.perms, "rw-p") << "the trainer's ring mapping";
    const uint64_t file_offset = mine.offset + (at - mine.start);
    for (const Line& node : lines) {
      if (node.inode != mine.inode || std::string(node.perms) != "rw-s" ||
          file_offset < node.offset || file_offset >= node.offset + (node.end - node.start)) {
        continue;
      }
      auto* shared = reinterpret_cast<void*>(node.start + (file_offset - node.offset));
      return torch::from_blob(shared, batch.sizes(), batch.options());
    }
  }
  ADD_FAILURE() << "no shared mapping of the trainer's batch";
  return torch::Tensor();
}

TEST_F(NodeTest, EachLaneGetsItsShareOfTheNodeOrderByteForByte) {
  auto options = this->options(4, 2);
  options.shuffle = true;
  options.seed = 5;
  Pipeline pipeline{RandomResizedCrop(16), RandomHorizontalFlip(), ToTensor()};
  NodeOptions node = node_options(unique_name("bytes"), 2);
  node.epochs = 2;
  NodeLoader server(dataset_, pipeline, options, node);
  EXPECT_EQ(server.batches_per_trainer(), 3);  // 21 -> 24 samples, 6 batches
  server.start();

  // The reference: a plain Loader over the same order (augmentation is
  // keyed by (seed, epoch, sample), so the bytes must match).
  auto reference_options = options;
  reference_options.max_samples_per_epoch = 24;
  Loader reference(dataset_, pipeline, reference_options);

  AttachedLoader first(node.name, lane(0));
  AttachedLoader second(node.name, lane(1));
  EXPECT_EQ(first.batches_per_epoch(), 3);
  EXPECT_EQ(first.device(), "cpu");
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    reference.set_epoch(epoch);
    reference.set_order(padded_order(21, options, 2, epoch));
    reference.begin_epoch();
    first.begin_epoch();
    second.begin_epoch();
    int64_t global = 0;
    while (std::optional<Batch> expected = reference.next()) {
      AttachedLoader& trainer = global % 2 == 0 ? first : second;
      std::optional<Batch> got = trainer.next();
      ASSERT_TRUE(got.has_value()) << "epoch " << epoch << " batch " << global;
      EXPECT_EQ(got->epoch, epoch);
      EXPECT_EQ(got->index, global / 2);
      EXPECT_EQ(got->sample_indices, expected->sample_indices);
      EXPECT_TRUE(torch::equal(got->data, expected->data)) << "batch " << global;
      EXPECT_TRUE(torch::equal(got->target, expected->target));
      ++global;
    }
    EXPECT_EQ(global, 6);
    EXPECT_FALSE(first.next().has_value());
    EXPECT_FALSE(second.next().has_value());
  }
  server.join();  // two epochs served
  NodeStats stats = server.stats();
  EXPECT_EQ(stats.batches, 12);
  EXPECT_EQ(stats.lane_batches, (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(stats.attaches, 2);
}

TEST_F(NodeTest, ANodeThatServedItsEpochsTellsTheTrainer) {
  NodeOptions node = node_options(unique_name("served"), 1);
  node.epochs = 1;
  NodeLoader server(dataset_, Pipeline{CenterCrop(8)}, options(8, 1), node);
  server.start();
  AttachedLoader trainer(node.name, lane(0));
  int batches = 0;
  while (trainer.next()) ++batches;
  EXPECT_EQ(batches, 3);
  try {
    trainer.next();  // epoch 1 was never served
    FAIL() << "no error after the node's last epoch";
  } catch (const NodeError& error) {
    EXPECT_NE(std::string(error.what()).find("served its 1 epoch"), std::string::npos)
        << error.what();
  }
}

TEST_F(NodeTest, AStoppedNodeFailsTheWaitingTrainerPromptly) {
  NodeOptions node = node_options(unique_name("stop"), 2);
  NodeLoader server(dataset_, Pipeline{CenterCrop(8)}, options(2, 1), node);
  server.start();
  AttachedLoader trainer(node.name, lane(0));
  ASSERT_TRUE(trainer.next().has_value());
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    server.stop();
  });
  // Lane 1 has no trainer: the node blocks once its slots are full, so lane
  // 0 runs dry and waits until the stop.
  auto started = std::chrono::steady_clock::now();
  EXPECT_THROW(
      {
        while (trainer.next()) {
        }
      },
      NodeError);
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

// A child forked by the node's process (a helper, multiprocessing's fork)
// that drops its copy of the NodeLoader: the serving thread, the listener
// and the node's state are the parent's. Before, the child joined a thread
// it does not have and marked the shared node stopped (its trainers then
// failed with "the node stopped").
TEST_F(NodeTest, AForkChildDroppingItsCopyLeavesTheNodeServing) {
  NodeOptions node = node_options(unique_name("fork"), 1);
  node.epochs = 1;
  auto server = std::make_unique<NodeLoader>(dataset_, Pipeline{CenterCrop(8)}, options(4, 1),
                                             node);
  server->start();
  auto trainer = std::make_unique<AttachedLoader>(node.name, lane(0));
  ASSERT_TRUE(trainer->next().has_value());
  std::fflush(nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    trainer.reset();
    server.reset();
    _exit(0);
  }
  ASSERT_EQ(testing::child_ending(child, 10), "exit 0");
  int batches = 1;
  while (trainer->next()) ++batches;
  EXPECT_EQ(batches, 6);  // 21 samples in batches of 4
  // The node ended its epoch itself: the child did not mark it stopped.
  try {
    trainer->next();
    FAIL() << "no error after the node's last epoch";
  } catch (const NodeError& error) {
    EXPECT_NE(std::string(error.what()).find("served its 1 epoch"), std::string::npos)
        << error.what();
  }
}

TEST_F(NodeTest, RefusalsNameTheReason) {
  NodeOptions node = node_options(unique_name("refuse"), 1);
  NodeLoader server(dataset_, Pipeline{CenterCrop(8)}, options(2, 1), node);
  AttachedLoader holder(node.name, lane(0));
  try {
    AttachedLoader second(node.name, lane(0));
    FAIL() << "two trainers on one lane";
  } catch (const NodeError& error) {
    EXPECT_NE(std::string(error.what()).find("attached by pid " + std::to_string(getpid())),
              std::string::npos)
        << error.what();
  }
  try {
    AttachedLoader outside(node.name, lane(1));
    FAIL() << "lane 1 of 1";
  } catch (const NodeError& error) {
    EXPECT_NE(std::string(error.what()).find("out of range"), std::string::npos) << error.what();
  }
  EXPECT_THROW(NodeLoader(dataset_, Pipeline{CenterCrop(8)}, options(2, 1), node), OptionError);
  node.name = unique_name("refuse-options");
  EXPECT_THROW(NodeLoader(dataset_, Pipeline{CenterCrop(8)}, options(0, 1), node), OptionError);
  auto drop = options(8, 1);
  drop.drop_last = true;
  node.trainers = 3;  // 21 samples < 3 trainers x 8
  EXPECT_THROW(NodeLoader(dataset_, Pipeline{CenterCrop(8)}, drop, node), OptionError);
  node.trainers = 1;
  node.device = "tpu";
  EXPECT_THROW(NodeLoader(dataset_, Pipeline{CenterCrop(8)}, options(2, 1), node), OptionError);
}

TEST_F(NodeTest, TheLaneIsGivenBackWhenTheLastBatchDies) {
  NodeOptions node = node_options(unique_name("giveback"), 1);
  NodeLoader server(dataset_, Pipeline{CenterCrop(8)}, options(2, 1), node);
  server.start();
  std::optional<Batch> kept;
  {
    AttachedLoader trainer(node.name, lane(0));
    kept = trainer.next();
    ASSERT_TRUE(kept.has_value());
  }
  auto wait_for = [&](int pid) {
    for (int i = 0; i < 200 && server.trainer_pids()[0] != pid; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return server.trainer_pids()[0];
  };
  // The batch still aliases a slot: the lane stays ours, the slot unfreed.
  EXPECT_EQ(wait_for(getpid()), getpid());
  torch::Tensor copy = kept->data.clone();
  EXPECT_TRUE(torch::equal(kept->data, copy));
  kept.reset();
  EXPECT_EQ(wait_for(0), 0);
  EXPECT_EQ(server.stats().reclaimed_slots, 0);
  // The next trainer goes on with the lane's next batch.
  AttachedLoader next(node.name, lane(0));
  std::optional<Batch> batch = next.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->index, 1);
}

TEST_F(NodeTest, ATrainerThatLeftGetsItsLaneBackAtOnce) {
  // The node may still be accepting when the next attach arrives, before it
  // polled the last one's hang-up: the lane must not look taken.
  NodeOptions node = node_options(unique_name("reattach"), 1);
  NodeLoader server(dataset_, Pipeline{CenterCrop(8)}, options(2, 1), node);
  for (int attempt = 0; attempt < 50; ++attempt) {
    AttachedLoader trainer(node.name, lane(0));
    EXPECT_EQ(trainer.trainer(), 0) << "attempt " << attempt;
  }
  EXPECT_EQ(server.stats().attaches, 50);
}

TEST_F(NodeTest, SetEpochSkipsForwardAndRefusesToGoBack) {
  NodeOptions node = node_options(unique_name("epochs"), 1);
  NodeLoader server(dataset_, Pipeline{CenterCrop(8)}, options(7, 1), node);
  server.start();
  AttachedLoader trainer(node.name, lane(0));
  trainer.set_epoch(2);
  std::optional<Batch> batch = trainer.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->epoch, 2);
  EXPECT_EQ(batch->index, 0);
  // A loop that breaks off: the next epoch starts at its own first batch.
  trainer.begin_epoch();
  batch = trainer.next();
  EXPECT_EQ(batch->epoch, 3);
  EXPECT_EQ(batch->index, 0);
  trainer.set_epoch(1);
  EXPECT_THROW(trainer.next(), OptionError);
}

TEST_F(NodeTest, HostLaneBatchesStayInTheNodeRingUntilReleased) {
  // A small ring: the node's Loader wraps it every few batches while each
  // lane holds a batch its trainer still reads. Those stay in their ring
  // slots (zero-copy), untouched by the workers, never spilled.
  auto options = this->options(2, 2);
  options.ring_slots = 2;
  options.shuffle = true;
  options.seed = 3;
  Pipeline pipeline{RandomResizedCrop(8), ToTensor()};
  NodeOptions node = node_options(unique_name("ring"), 2);
  node.epochs = 2;
  NodeLoader server(dataset_, pipeline, options, node);
  server.start();
  auto reference_options = options;
  reference_options.max_samples_per_epoch = 24;
  Loader reference(dataset_, pipeline, reference_options);
  AttachedLoader trainers[2] = {AttachedLoader(node.name, lane(0)),
                                AttachedLoader(node.name, lane(1))};
  std::optional<Batch> previous[2];
  torch::Tensor previous_bytes[2];
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    reference.set_epoch(epoch);
    reference.set_order(padded_order(21, options, 2, epoch));
    reference.begin_epoch();
    for (AttachedLoader& trainer : trainers) trainer.begin_epoch();
    int64_t global = 0;
    while (std::optional<Batch> expected = reference.next()) {
      const int64_t which = global % 2;
      std::optional<Batch> got = trainers[which].next();
      ASSERT_TRUE(got.has_value()) << "epoch " << epoch << " batch " << global;
      EXPECT_TRUE(torch::equal(got->data, expected->data)) << "batch " << global;
      // The batch before it, still held, was not overwritten meanwhile.
      if (previous[which]) {
        EXPECT_TRUE(torch::equal(previous[which]->data, previous_bytes[which]))
            << "epoch " << epoch << " batch " << global;
      }
      previous_bytes[which] = got->data.clone();
      previous[which] = std::move(got);
      ++global;
    }
    EXPECT_EQ(global, 12);  // 21 -> 24 samples
  }
  previous[0].reset();
  previous[1].reset();
  server.join();
  const NodeStats stats = server.stats();
  EXPECT_EQ(stats.loader.ring_slots, 2 + 2 * 2);  // decode-ahead + trainers x lane slots
  EXPECT_EQ(stats.loader.spilled_batches, 0);
  EXPECT_EQ(stats.batches, 24);
}

TEST_F(NodeTest, InPlaceOpsOnHostBatchesArePrivateAndNeverReachALaterBatch) {
  // Trainers change every batch in place, as training scripts do (before:
  // SIGSEGV on the read-only ring). The writes stay in the trainer's pages:
  // the node's ring keeps its bytes, and after a small ring has been reused
  // by both lanes for three epochs every batch still equals the reference
  // (a private page kept past its batch's release would show old bytes).
  // 3 x 3 x 40 x 40 floats = 57600 bytes: the last page is partly the
  // slot's targets and indices.
  auto options = this->options(3, 2);
  options.ring_slots = 2;
  options.shuffle = true;
  options.seed = 11;
  Pipeline pipeline{RandomResizedCrop(40), RandomHorizontalFlip(), ToTensor()};
  NodeOptions node = node_options(unique_name("in-place"), 2);
  node.epochs = 3;
  NodeLoader server(dataset_, pipeline, options, node);
  server.start();
  auto reference_options = options;
  reference_options.max_samples_per_epoch = 24;
  Loader reference(dataset_, pipeline, reference_options);
  AttachedLoader trainers[2] = {AttachedLoader(node.name, lane(0)),
                                AttachedLoader(node.name, lane(1))};
  std::optional<Batch> held[2];  // one batch a lane is kept while the next comes
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    reference.set_epoch(epoch);
    reference.set_order(padded_order(21, options, 2, epoch));
    reference.begin_epoch();
    for (AttachedLoader& trainer : trainers) trainer.begin_epoch();
    int64_t global = 0;
    while (std::optional<Batch> expected = reference.next()) {
      const int64_t which = global % 2;
      std::optional<Batch> got = trainers[which].next();
      ASSERT_TRUE(got.has_value()) << "epoch " << epoch << " batch " << global;
      ASSERT_TRUE(torch::equal(got->data, expected->data))
          << "stale bytes in epoch " << epoch << " batch " << global;
      torch::Tensor node_bytes = node_view(got->data);
      ASSERT_TRUE(node_bytes.defined());
      got->data.mul_(-3).add_(7);  // every byte of the batch, its last page too
      EXPECT_FALSE(torch::equal(got->data, expected->data));
      EXPECT_TRUE(torch::equal(node_bytes, expected->data))
          << "the node's ring changed, epoch " << epoch << " batch " << global;
      held[which] = std::move(got);  // releases the lane's batch before it
      ++global;
    }
    EXPECT_EQ(global, 8);  // 21 -> 24 samples
  }
  held[0].reset();
  held[1].reset();
  server.join();
  EXPECT_EQ(server.stats().loader.spilled_batches, 0);
}

TEST_F(NodeTest, KeptBatchesAreCopiedOutOfTheLane) {
  NodeOptions node = node_options(unique_name("kept"), 1);
  node.epochs = 1;
  NodeLoader server(dataset_, Pipeline{CenterCrop(8), ToTensor()}, options(2, 1), node);
  server.start();
  AttachedLoader trainer(node.name, lane(0));
  std::vector<Batch> kept;  // 11 batches through 2 slots
  while (std::optional<Batch> batch = trainer.next()) kept.push_back(std::move(*batch));
  ASSERT_EQ(kept.size(), 11u);
  Loader reference(dataset_, Pipeline{CenterCrop(8), ToTensor()}, [&] {
    auto options = this->options(2, 0);
    options.max_samples_per_epoch = 22;
    return options;
  }());
  reference.set_order(padded_order(21, options(2, 1), 1, 0));
  size_t i = 0;
  for (Batch& expected : reference) {
    EXPECT_TRUE(torch::equal(kept[i].data, expected.data)) << "batch " << i;
    ++i;
  }
  EXPECT_EQ(i, 11u);
}

}  // namespace
}  // namespace ringloader
