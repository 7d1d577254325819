// SPDX-License-Identifier: BSD-3-Clause
#include "loader/ring/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace ringloader::ring {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "futex needs the atomic to be the bare word");

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected,
                int64_t timeout_ns) {
  timespec timeout{};
  timespec* timeout_ptr = nullptr;
  if (timeout_ns >= 0) {
    timeout.tv_sec = timeout_ns / 1000000000;
    timeout.tv_nsec = timeout_ns % 1000000000;
    timeout_ptr = &timeout;
  }
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected,
          timeout_ptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
}

uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ULL + now.tv_nsec;
}

}  // namespace ringloader::ring
