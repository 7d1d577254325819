// SPDX-License-Identifier: BSD-3-Clause
// Philox4x32-10. Key: the seed's two 32-bit halves (low, high). Counter
// words: [0] block number (0, 1, 2, ... as values are drawn), [1] stream,
// [2..3] the low and high halves of splitmix64(epoch) + index. So every
// (seed, epoch, index, stream) names its own sequence of 2^32 blocks of four
// 32-bit values; next_u32 hands them out in order, next_u64 takes two
// (first one high), uniform() the top 53 bits of next_u64.
#include "ringloader/random.h"

#include <utility>

#include "base/philox.h"

namespace ringloader {
namespace {

constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void philox_round(std::array<uint32_t, 4>& c, const std::array<uint32_t, 2>& k) {
  const uint64_t p0 = uint64_t{kMultiplier0} * c[0];
  const uint64_t p1 = uint64_t{kMultiplier1} * c[2];
  c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
       static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
}

}  // namespace

namespace base {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    philox_round(counter, key);
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

}  // namespace base

SampleRng::SampleRng(uint64_t seed, uint64_t epoch, uint64_t index,
                     uint32_t stream)
    : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)} {
  // (epoch, index) must not collide for different pairs: mix the epoch
  // through splitmix64 and add the index, a bijection for a fixed epoch.
  const uint64_t where = splitmix64(epoch) + index;
  counter_ = {0, stream, static_cast<uint32_t>(where),
              static_cast<uint32_t>(where >> 32)};
}

void SampleRng::refill() {
  block_ = base::philox4x32_10(counter_, key_);
  ++counter_[0];
  used_ = 0;
}

uint32_t SampleRng::next_u32() {
  if (used_ >= 4) refill();
  return block_[used_++];
}

uint64_t SampleRng::next_u64() {
  const uint64_t high = next_u32();
  return (high << 32) | next_u32();
}

double SampleRng::uniform() {
  return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

double SampleRng::uniform(double low, double high) {
  return low + (high - low) * uniform();
}

int64_t SampleRng::integer(int64_t low, int64_t high) {
  if (high < low) std::swap(low, high);
  const uint64_t span = static_cast<uint64_t>(high - low) + 1;
  if (span == 0) return static_cast<int64_t>(next_u64());  // full range
  // Rejection sampling: no modulo bias.
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % span);
  uint64_t draw = next_u64();
  while (draw >= limit) draw = next_u64();
  return low + static_cast<int64_t>(draw % span);
}

bool SampleRng::bernoulli(double p) { return uniform() < p; }

}  // namespace ringloader
