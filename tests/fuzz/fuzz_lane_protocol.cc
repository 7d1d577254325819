// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer harness for the node's side of the lane protocol
// (loader/node/node_lane.h, lane_protocol.h): a node lane fills, publishes
// (at once, or later as a CUDA copy completes), reclaims and re-attaches,
// while its "trainer" is the fuzzer: it leases and releases honestly, or
// writes arbitrary words into its control memfd. The node must never crash
// or index out of bounds (ASan, UBSan), and every step must either proceed
// or flag a violation:
//   - a slot it fills was FREE for that batch in the trainer's words;
//   - it waits only on a word an honest trainer can leave (READY or LEASED
//     of the slot's last batch);
//   - it drops batches only after a violation;
//   - an honest trainer (no arbitrary write since it attached) is never
//     flagged, and a trainer that attached and did nothing leaves cleanly.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include "loader/node/lane_control.h"
#include "loader/node/lane_protocol.h"
#include "loader/node/node_lane.h"
#include "loader/ring/shared_region.h"

namespace {

using namespace ringloader::node;

void require(bool condition) {
  if (!condition) std::abort();
}

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return used_ >= size_; }
  uint64_t take(size_t bytes) {
    uint64_t value = 0;
    for (size_t i = 0; i < bytes && used_ < size_; ++i) value = value << 8 | data_[used_++];
    return value;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t used_ = 0;
};

// The fuzzer's trainer: its mapping of the lane's control memfd.
struct Trainer {
  ringloader::ring::SharedRegion control;
  ControlHeader* header = nullptr;
  uint64_t cursor = 0;
  std::deque<uint64_t> leased;
  bool tainted = false;  // wrote an arbitrary word since it attached

  std::atomic<uint32_t>& word(uint64_t slot) { return control_slots(header)[slot].state; }
};

struct Harness {
  uint32_t slots;
  LaneSlot region[kMaxLaneSlots] = {};
  NodeLane lane;
  Trainer trainer;
  bool attached = false;
  uint64_t in_flight = 0;  // filled, not yet published (CUDA copies)
  int64_t violations = 0;

  explicit Harness(uint32_t count) : slots(count), lane(0, count, region, nullptr) {}

  void attach() {
    if (attached) return;
    const int fd = lane.attach();
    trainer = Trainer{};
    trainer.control = ringloader::ring::SharedRegion::attach(dup(fd));
    require(trainer.control.size() == control_bytes(slots));
    trainer.header = static_cast<ControlHeader*>(trainer.control.data());
    require(trainer.header->magic == kControlMagic && trainer.header->slots == slots);
    trainer.cursor = trainer.header->next_lease.load(std::memory_order_acquire);
    attached = true;
  }

  void detach() {
    if (!attached) return;
    int reclaimed = -1;
    std::string why;
    const bool clean = lane.detach(&reclaimed, &why);
    require(reclaimed >= 0 && reclaimed <= static_cast<int>(slots));
    if (!trainer.tainted) require(clean);
    attached = false;
    // The old mapping stays ours: writes into it must change nothing.
    for (uint32_t s = 0; s < slots; ++s) trainer.word(s).store(0xffffffffu);
    note_violations();
  }

  void note_violations() {
    const int64_t now = lane.counts().violations;
    require(now >= violations);
    // Only a trainer that wrote arbitrary words is ever flagged.
    if (now > violations) require(trainer.tainted);
    if (now > violations) attached = false;  // the node let go of that control
    violations = now;
  }

  void fill(bool deferred) {
    const uint64_t wanted = lane.next_batch();
    uint32_t seen = attached ? trainer.word(wanted % slots).load() : 0;
    switch (lane.wait_free(0)) {
      case NodeLane::Wait::kFill:
        if (attached) require(seen == lane_state(wanted, slots, kLaneFree));
        lane.filled();
        if (deferred) ++in_flight;
        else publish_all();
        break;
      case NodeLane::Wait::kBusy:
        if (attached && in_flight == 0 && lane.counts().violations == violations) {
          require(wanted >= slots && (seen == lane_state(wanted - slots, slots, kLaneReady) ||
                                      seen == lane_state(wanted - slots, slots, kLaneLeased)));
        }
        break;
      case NodeLane::Wait::kDrop:
        require(lane.counts().violations > 0);
        lane.dropped();
        break;
    }
    note_violations();
  }

  void publish_all() {
    // published() only for batches filled; both orders of calls are legal.
    lane.published();
    while (in_flight > 0) {
      lane.published();
      --in_flight;
    }
  }

  void publish_one() {
    if (in_flight == 0) return;
    lane.published();
    --in_flight;
  }

  void lease() {
    if (!attached) return;
    const uint64_t n = trainer.cursor;
    if (trainer.word(n % slots).load() != lane_state(n, slots, kLaneReady)) return;
    trainer.header->next_lease.store(n + 1);
    trainer.word(n % slots).store(lane_state(n, slots, kLaneLeased));
    trainer.leased.push_back(n);
    ++trainer.cursor;
  }

  void release(uint64_t which) {
    if (!attached || trainer.leased.empty()) return;
    const size_t at = which % trainer.leased.size();
    const uint64_t n = trainer.leased[at];
    trainer.leased.erase(trainer.leased.begin() + static_cast<long>(at));
    trainer.word(n % slots).store(lane_state(n + slots, slots, kLaneFree));
  }

  void scribble(uint64_t where, uint64_t value) {
    if (!attached) return;
    trainer.tainted = true;
    if (where % (slots + 1) == slots) {
      trainer.header->next_lease.store(value);
    } else {
      trainer.word(where % (slots + 1)).store(static_cast<uint32_t>(value));
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input input(data, size);
  const auto slots = static_cast<uint32_t>(1 + input.take(1) % kMaxLaneSlots);
  Harness harness(slots);
  for (int step = 0; step < 512 && !input.empty(); ++step) {
    switch (input.take(1) % 10) {
      case 0: harness.fill(false); break;
      case 1: harness.fill(true); break;
      case 2: harness.publish_one(); break;
      case 3: harness.attach(); break;
      case 4: harness.detach(); break;
      case 5: harness.lease(); break;
      case 6: harness.release(input.take(1)); break;
      case 7: harness.scribble(input.take(1), input.take(8)); break;
      case 8:
        harness.lane.slot_released(static_cast<uint32_t>(input.take(1) % slots));
        harness.note_violations();
        break;
      case 9: {
        // A fresh attach that does nothing leaves cleanly.
        harness.detach();
        harness.attach();
        harness.detach();
        break;
      }
    }
    require(harness.lane.take_violation().empty() ||
            harness.lane.counts().violations > 0);
  }
  return 0;
}
