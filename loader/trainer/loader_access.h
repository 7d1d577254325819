// SPDX-License-Identifier: BSD-3-Clause
// What the library's own components (the node loader) may reach inside a
// Loader that users may not: the ring's memfd, to share the slots' pages
// with other processes, and the waiting policy for slots whose batches are
// released by another party.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringloader/loader.h"

namespace ringloader::internal {

struct LoaderAccess {
  // The ring's memfd and its mapping in this process. Any thread; valid for
  // the Loader's life.
  static int ring_fd(const Loader& loader);
  static const uint8_t* ring_base(const Loader& loader);
  static size_t ring_bytes(const Loader& loader);
  // Trainer thread, before the first next(). When the slot next() needs is
  // leased by a batch still alive, next() waits (calling its WaitCheck,
  // with timeout_s) for another party to drop that batch, instead of
  // spilling it or throwing LeaseError: the node loader's lanes hold ring
  // batches that a trainer process reads, so they must never be spilled.
  static void wait_for_held_slots(Loader& loader);
};

}  // namespace ringloader::internal
