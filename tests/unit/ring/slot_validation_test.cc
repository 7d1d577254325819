// SPDX-License-Identifier: BSD-3-Clause
// Words a peer writes into the ring, as the trainer (slot_validation.h) and
// the claim loop (SlotProtocol) read them: out-of-range values are refused
// with a violation naming slot, field and value; honest values, including
// generations that wrapped, are never refused.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>

#include "loader/ring/ring.h"
#include "loader/ring/slot_protocol.h"
#include "loader/ring/slot_validation.h"

namespace ringloader::ring {
namespace {

RingGeometry geometry() {
  RingGeometry out;
  out.slot_count = 3;
  out.worker_capacity = 2;
  out.batch_size = 4;
  out.sample_bytes = 8;
  out.order_capacity = 16;
  return out;
}

TEST(SlotValidation, ReadySlotCopiesCountAndIndicesWhenInRange) {
  auto ring = Ring::create(geometry());
  ring->slot(1).sample_count = 3;
  int64_t* indices = ring->slot_sample_indices(1);
  indices[0] = 0, indices[1] = 9, indices[2] = 5;
  ReadySlot ready = read_ready_slot(*ring, 4, 3, 10);  // batch 4 lives in slot 1
  ASSERT_TRUE(ready.violation.empty()) << ready.violation;
  EXPECT_EQ(ready.sample_count, 3u);
  EXPECT_EQ(ready.sample_indices, (std::vector<int64_t>{0, 9, 5}));
  indices[0] = 7;  // a later write changes nothing already copied
  EXPECT_EQ(ready.sample_indices[0], 0);
}

TEST(SlotValidation, ReadySlotRefusesCountsAndIndicesOutOfRange) {
  auto ring = Ring::create(geometry());
  for (uint32_t count : {0u, 2u, 5u, 0x80000000u, 0xffffffffu}) {
    ring->slot(0).sample_count = count;
    ReadySlot ready = read_ready_slot(*ring, 3, 4, 10);
    EXPECT_NE(ready.violation.find("slot 0 (batch id 3) has sample_count = " +
                                   std::to_string(count) + ", expected 4"),
              std::string::npos)
        << ready.violation;
    EXPECT_TRUE(ready.sample_indices.empty());
  }
  ring->slot(0).sample_count = 4;
  for (int64_t bad : {int64_t{-1}, int64_t{10}, INT64_MIN, INT64_MAX}) {
    ring->slot_sample_indices(0)[3] = bad;
    ReadySlot ready = read_ready_slot(*ring, 3, 4, 10);
    EXPECT_NE(ready.violation.find("sample index 3 = " + std::to_string(bad)),
              std::string::npos)
        << ready.violation;
  }
}

TEST(SlotValidation, FailedSlotBoundsFillerKindAndText) {
  auto ring = Ring::create(geometry());
  SlotControl& slot = ring->slot(2);
  slot.filler.store(1, std::memory_order_relaxed);
  slot.error_kind = static_cast<uint32_t>(ErrorKind::kIo);
  std::strcpy(slot.error_text, "no such file");
  FailedSlot failed = read_failed_slot(*ring, 2);
  EXPECT_EQ(failed.filler, 1);
  EXPECT_EQ(failed.kind, ErrorKind::kIo);
  EXPECT_EQ(failed.text, "no such file");
  EXPECT_TRUE(failed.note.empty());

  slot.filler.store(2, std::memory_order_relaxed);  // the capacity is 2
  slot.error_kind = 99;
  std::memset(slot.error_text, 'x', kErrorTextBytes);
  std::memset(slot.padding2, 'y', sizeof slot.padding2);
  failed = read_failed_slot(*ring, 2);
  EXPECT_EQ(failed.filler, -1);
  EXPECT_EQ(failed.kind, ErrorKind::kOther);
  EXPECT_EQ(failed.text, std::string(kErrorTextBytes - 1, 'x'));
  EXPECT_NE(failed.note.find("filler = 2"), std::string::npos) << failed.note;
  slot.filler.store(-7, std::memory_order_relaxed);
  EXPECT_EQ(read_failed_slot(*ring, 2).filler, -1);
}

// A long message (a pipe: command named twice) keeps what failed and why:
// the reason comes last, so a head-only cut would lose it.
TEST(SlotValidation, ALongErrorKeepsItsHeadAndItsReason) {
  const std::string where = "batch 3 of epoch 0: sample 15 (";
  const std::string reason = "): stale index: it counts 6 samples, the shard holds 5";
  const std::string middle(600, 'p');
  const std::string fitted = fit_error_text(where + middle + reason);
  EXPECT_EQ(fitted.size(), kErrorTextBytes - 1);
  EXPECT_EQ(fitted.rfind(where, 0), 0u) << fitted;
  EXPECT_EQ(fitted.substr(fitted.size() - reason.size()), reason) << fitted;
  EXPECT_NE(fitted.find(" [...] "), std::string::npos);
  EXPECT_EQ(fit_error_text("short"), "short");
  // Cuts fall between characters: two-byte ones everywhere stay whole.
  std::string accents;
  for (int i = 0; i < 400; ++i) accents += "\xc3\xa9";
  const std::string cut = fit_error_text(accents);
  EXPECT_LE(cut.size(), kErrorTextBytes - 1);
  EXPECT_EQ(sanitize_text(cut.c_str(), cut.size() + 1), cut);
}

TEST(SlotValidation, TextIsPrintableUtf8) {
  const char text[] = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|"
                      "\xe2\x82|\x1b[2J\x7f\ttab";
  EXPECT_EQ(sanitize_text(text, sizeof text),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80|??|???|????|??|?[2J?\ttab");
  EXPECT_EQ(sanitize_text("abc", 2), "ab");  // stops at the capacity
}

TEST(SlotValidation, AwaitedStatesOfHonestPartiesPass) {
  const uint32_t slots = 3;
  for (uint64_t batch : {uint64_t{0}, uint64_t{7}, (uint64_t{kGenerationMask} + 1) * slots + 1}) {
    for (uint32_t phase : {kFree, kFilling, kReady, kFailed}) {
      EXPECT_EQ(check_awaited_state(slots, batch, state_word(batch, slots, SlotPhase(phase))), "");
    }
    // Older ids of the slot, leased or parked, across the generation wrap.
    for (uint64_t back = 1; back <= 3; ++back) {
      uint64_t older = batch + (uint64_t{kGenerationMask} + 1) * slots - back * slots;
      EXPECT_EQ(check_awaited_state(slots, batch, state_word(older, slots, kLeased)), "");
    }
  }
}

TEST(SlotValidation, ForgedAwaitedStatesAreNamed) {
  const uint32_t slots = 3;
  const uint64_t batch = 7;  // slot 1, generation 2
  EXPECT_NE(check_awaited_state(slots, batch, 2u << kPhaseBits | 5).find("state = 0x00000015"),
            std::string::npos);
  EXPECT_NE(check_awaited_state(slots, batch, state_word(batch + slots, slots, kReady))
                .find("slot 1 (batch id 7) has state"),
            std::string::npos);
  EXPECT_NE(check_awaited_state(slots, batch, state_word(batch, slots, kLeased)), "");
}

// Before: a claim word whose tag named a plan nobody published made every
// claimer spin forever, re-reading the same word.
TEST(SlotProtocolPeers, ForgedClaimWordIsNoClaimNotASpin) {
  auto ring = Ring::create(geometry());
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 4, 16, 0);
  ring->claims().claim.store(uint64_t{5} << kClaimTagShift, std::memory_order_release);
  // A detached thread: a spinning claimer must fail the test, not hang it.
  auto result = std::make_shared<std::promise<bool>>();
  std::future<bool> claimed = result->get_future();
  std::thread([ring, result] {
    Claim claim;
    result->set_value(SlotProtocol(*ring).try_claim(claim));
  }).detach();
  ASSERT_EQ(claimed.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "try_claim spins on a forged claim word";
  EXPECT_FALSE(claimed.get());
}

// Before: a worker took a plan whose order table lies outside the ring, and
// read out of bounds. A sample count past the table's capacity is a long
// epoch's window (Loader::Impl::publish_more): its entries wrap.
TEST(SlotProtocolPeers, PlanOutsideTheOrderTablesIsNotClaimed) {
  auto ring = Ring::create(geometry());
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 4, 16, 0);
  Plan& plan = ring->plan(1);
  Claim claim;
  plan.order_table.store(2, std::memory_order_relaxed);
  EXPECT_FALSE(protocol.try_claim(claim));
  plan.order_table.store(1, std::memory_order_relaxed);
  plan.sample_count.store(uint64_t{1} << 62, std::memory_order_relaxed);  // capacity 16
  ASSERT_TRUE(protocol.try_claim(claim));
  ring->set_order_entry(1, 3, 77);
  EXPECT_EQ(ring->order_entry(1, (uint64_t{1} << 62) + 3), 77);
}

}  // namespace
}  // namespace ringloader::ring
