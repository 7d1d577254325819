// SPDX-License-Identifier: BSD-3-Clause
// futex(2) on a 32-bit word in shared memory. Not FUTEX_PRIVATE: waiters and
// wakers are different processes mapping the same memfd pages.
#pragma once

#include <atomic>
#include <cstdint>

namespace ringloader::ring {

// Sleeps while *word == expected, at most timeout_ns (< 0: no limit).
// Returns on wake, timeout, signal or if the word already differs; callers
// re-check their condition in a loop.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected,
                int64_t timeout_ns);
void futex_wake_all(std::atomic<uint32_t>& word);

uint64_t monotonic_ns();

}  // namespace ringloader::ring
