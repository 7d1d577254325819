// SPDX-License-Identifier: BSD-3-Clause
// Words a worker writes into the ring are untrusted input to the trainer.
// Each test lets batch 0 become READY, then plays a broken or hostile
// worker: it maps the ring's memfd itself and writes a bad value into one
// peer-writable word of slot 0 (sample count, sample indices, filler, error
// record, state word). The trainer must raise WorkerError naming the slot,
// field and value, or recover, and never crash, read out of bounds or hang.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "loader/ring/ring_layout.h"
#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

using Clock = std::chrono::steady_clock;

// This process's own mapping of the (only) Loader's ring, as a worker has.
class RingScribbler {
 public:
  RingScribbler() {
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code error;
      std::string target = std::filesystem::read_symlink(entry.path(), error).string();
      if (error || target.rfind("/memfd:ringloader-ring", 0) != 0) continue;
      int fd = open(entry.path().c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) continue;
      bytes_ = static_cast<size_t>(lseek(fd, 0, SEEK_END));
      base_ = static_cast<uint8_t*>(
          mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
      close(fd);
      if (base_ == MAP_FAILED) base_ = nullptr;
      if (base_) return;
    }
  }
  ~RingScribbler() {
    if (base_) munmap(base_, bytes_);
  }
  bool mapped() const { return base_ != nullptr; }
  const ring::RingHeader& header() const {
    return *reinterpret_cast<const ring::RingHeader*>(base_);
  }
  ring::SlotControl& slot(uint32_t index) const {
    constexpr size_t kSlots = sizeof(ring::RingHeader) + sizeof(ring::ClaimControl) +
                              ring::kPlanCount * sizeof(ring::Plan) +
                              sizeof(ring::RedoQueue);
    return reinterpret_cast<ring::SlotControl*>(base_ + kSlots)[index];
  }
  int64_t* sample_indices(uint32_t index) const {
    const uint64_t data = header().total_bytes -
                          uint64_t{header().slot_count} * header().slot_data_bytes;
    return reinterpret_cast<int64_t*>(base_ + data + index * header().slot_data_bytes +
                                      header().indices_offset);
  }
  // Waits until slot `index` holds batch `index` (< 4), READY: no worker
  // writes it again until the trainer hands it back.
  bool wait_ready(uint32_t index) const {
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      if (slot(index).state.load(std::memory_order_acquire) == ring::kReady) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
};

class RingPeerWords : public testing::FolderTest<2, 8> {
 protected:
  void SetUp() override {
    FolderTest::SetUp();
    LoaderOptions opts = options(kBatch, 1);
    opts.ring_slots = 4;  // the whole epoch fits: batch 0 stays put
    opts.poll_interval_s = 0.02;
    // An unfixed trainer would wait forever on some states: bounded here,
    // so the test fails with the wrong error instead of hanging.
    opts.timeout_s = 5;
    loader_ = std::make_unique<Loader>(dataset_, Pipeline{RandomResizedCrop(16), ToTensor()},
                                       opts);
    loader_->set_epoch(0);
    loader_->begin_epoch();
    scribbler_.emplace();  // maps the ring just made
    ASSERT_TRUE(scribbler_->mapped());
    // The whole epoch READY before any word is forged: a rejected batch
    // kills the worker that filled it, and only the trainer's next()
    // replaces it, so a batch still unfilled then would never come (as
    // under ASan, whose worker is slower than the test).
    for (uint32_t batch = 0; batch < 4; ++batch) ASSERT_TRUE(scribbler_->wait_ready(batch));
  }
  // next() must raise WorkerError; returns its message.
  std::string next_error() {
    try {
      loader_->next();
    } catch (const WorkerError& error) {
      return error.what();
    } catch (const std::exception& error) {
      ADD_FAILURE() << "expected WorkerError, got: " << error.what();
      return "";
    }
    ADD_FAILURE() << "expected WorkerError, next() returned a batch";
    return "";
  }
  // After a dropped batch 0, the other three arrive whole, then the end.
  void expect_rest_of_epoch() {
    for (int64_t index = 1; index < 4; ++index) {
      std::optional<Batch> batch = loader_->next();
      ASSERT_TRUE(batch);
      EXPECT_EQ(batch->index, index);
      EXPECT_EQ(batch->data.size(0), kBatch);
      EXPECT_EQ(batch->target.size(0), kBatch);
      EXPECT_EQ(batch->sample_indices.size(), static_cast<size_t>(kBatch));
    }
    EXPECT_FALSE(loader_->next());
  }
  void fail_slot0(const void* text, size_t bytes) {
    ring::SlotControl& slot = scribbler_->slot(0);
    slot.error_kind = static_cast<uint32_t>(ring::ErrorKind::kOther);
    std::memcpy(slot.error_text, text, bytes);
    slot.state.store(ring::kFailed, std::memory_order_release);
  }

  static constexpr int kBatch = 4;
  std::unique_ptr<Loader> loader_;
  std::optional<RingScribbler> scribbler_;
};

TEST_F(RingPeerWords, HugeSampleCountIsAWorkerErrorAndTheWorkerIsReplaced) {
  const int worker = loader_->worker_pids().at(0);
  scribbler_->slot(0).sample_count = 0xffffffffu;
  std::string message = next_error();
  EXPECT_NE(message.find("slot 0"), std::string::npos) << message;
  EXPECT_NE(message.find("sample_count = 4294967295"), std::string::npos) << message;
  EXPECT_NE(message.find("worker 0"), std::string::npos) << message;
  expect_rest_of_epoch();
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (testing::process_alive(worker) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(testing::process_alive(worker)) << "the worker that wrote it lives on";
  // The next epoch runs on its replacement.
  loader_->set_epoch(1);
  int batches = 0;
  for (const Batch& batch : *loader_) batches += batch.data.size(0) == kBatch;
  EXPECT_EQ(batches, 4);
}

TEST_F(RingPeerWords, SampleCountOneOverTheBatchSize) {
  scribbler_->slot(0).sample_count = kBatch + 1;
  EXPECT_NE(next_error().find("sample_count = 5, expected 4"), std::string::npos);
  expect_rest_of_epoch();
}

TEST_F(RingPeerWords, SampleCountUnderTheBatchOrNegative) {
  scribbler_->slot(0).sample_count = 1;
  EXPECT_NE(next_error().find("sample_count = 1, expected 4"), std::string::npos);
  // Batch 1 next, with a count that is negative as a signed word.
  ASSERT_TRUE(scribbler_->wait_ready(1));
  scribbler_->slot(1).sample_count = 0x80000000u;
  EXPECT_NE(next_error().find("sample_count = 2147483648"), std::string::npos);
}

TEST_F(RingPeerWords, SampleIndexOutsideTheDataset) {
  scribbler_->sample_indices(0)[2] = 16;  // the dataset has 16 samples
  std::string message = next_error();
  EXPECT_NE(message.find("sample index 2 = 16, expected [0, 16)"), std::string::npos)
      << message;
  ASSERT_TRUE(scribbler_->wait_ready(1));
  scribbler_->sample_indices(1)[0] = -5;
  message = next_error();
  EXPECT_NE(message.find("sample index 0 = -5"), std::string::npos) << message;
}

TEST_F(RingPeerWords, FailedSlotNamingNoWorker) {
  // Unchecked, the filler word indexed the worker table 256 GiB away.
  scribbler_->slot(0).filler.store(INT32_MAX, std::memory_order_relaxed);
  fail_slot0("decoder exploded", 17);
  std::string message = next_error();
  EXPECT_NE(message.find("decoder exploded"), std::string::npos) << message;
  EXPECT_NE(message.find("filler = 2147483647"), std::string::npos) << message;
  expect_rest_of_epoch();
}

TEST_F(RingPeerWords, UnterminatedErrorTextIsCutAtItsField) {
  // No terminator anywhere in the field nor the padding after it.
  ring::SlotControl& slot = scribbler_->slot(0);
  std::memset(slot.padding2, 'A', sizeof slot.padding2);
  std::string text(ring::kErrorTextBytes, 'A');
  fail_slot0(text.data(), text.size());
  std::string message = next_error();
  size_t letters = std::count(message.begin(), message.end(), 'A');
  EXPECT_LE(letters, ring::kErrorTextBytes - 1) << message.size();
  EXPECT_GE(letters, ring::kErrorTextBytes - 1);
  expect_rest_of_epoch();
}

TEST_F(RingPeerWords, ErrorTextIsValidUtf8) {
  // Python builds the exception's str from it: invalid UTF-8 lost the error.
  const char text[] = "bad \xff\xfe\xc3 bytes \x01 \xc3\xa9";
  fail_slot0(text, sizeof text);
  std::string message = next_error();
  EXPECT_NE(message.find("bad ??? bytes ? \xc3\xa9"), std::string::npos) << message;
}

TEST_F(RingPeerWords, StateWithNoSuchPhase) {
  scribbler_->slot(0).state.store(7, std::memory_order_release);
  auto start = Clock::now();
  std::string message = next_error();
  EXPECT_NE(message.find("state = 0x00000007"), std::string::npos) << message;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2)) << "waited for a forged state";
}

TEST_F(RingPeerWords, StateOfABatchNotYetTaken) {
  // READY for batch 4 (generation 1) while the trainer waits for batch 0.
  scribbler_->slot(0).state.store(1u << ring::kPhaseBits | ring::kReady,
                                 std::memory_order_release);
  std::string message = next_error();
  EXPECT_NE(message.find("state = 0x0000000a"), std::string::npos) << message;
}

TEST_F(RingPeerWords, LeasedStateOfTheAwaitedBatch) {
  // Taken as a batch the trainer holds, it raised LeaseError ("drop earlier
  // batches"), and a node (which waits for held slots) waited forever.
  scribbler_->slot(0).state.store(ring::kLeased, std::memory_order_release);
  std::string message = next_error();
  EXPECT_NE(message.find("state = 0x00000004"), std::string::npos) << message;
}

}  // namespace
}  // namespace ringloader
