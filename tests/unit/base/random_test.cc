// SPDX-License-Identifier: BSD-3-Clause
// SampleRng: Philox4x32-10 known answers, keying by (seed, epoch, index,
// stream), and unbiased uniform / integer / bernoulli draws. Fixed seeds,
// bands of ~4-5 standard deviations: deterministic, never flaky.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ringloader/random.h"
#include "base/philox.h"

namespace ringloader {
namespace {

// Random123's kat_vectors for philox4x32_10.
TEST(RandomPhilox, MatchesPublishedKnownAnswers) {
  using base::philox4x32_10;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(RandomSampleRng, StreamIsAPureFunctionOfItsKey) {
  SampleRng a(1, 2, 3), b(1, 2, 3);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next_u32(), b.next_u32());
  std::set<uint64_t> firsts;
  for (uint64_t seed : {1, 2}) {
    for (uint64_t epoch : {0, 1, 7}) {
      for (uint64_t index : {0, 1, 1000000}) {
        for (uint32_t stream : {0u, 1u}) {
          firsts.insert(SampleRng(seed, epoch, index, stream).next_u64());
        }
      }
    }
  }
  EXPECT_EQ(firsts.size(), 2u * 3 * 3 * 2);
  // The first block is Philox of the documented counter and key:
  // key (seed low, seed high), counter (block 0, stream, splitmix64(epoch)
  // + index as low, high); splitmix64(0) = 0xE220A8397B1DCDAF.
  SampleRng c(0x0000000500000004ull, 0, 0, 9);
  const auto block = base::philox4x32_10(
      {0, 9, static_cast<uint32_t>(0xE220A8397B1DCDAFull),
       static_cast<uint32_t>(0xE220A8397B1DCDAFull >> 32)},
      {4, 5});
  EXPECT_EQ(c.next_u32(), block[0]);
  EXPECT_EQ(c.next_u32(), block[1]);
}

TEST(RandomSampleRng, IntegerIsUniformAndInRange) {
  SampleRng rng(42, 0, 0);
  int counts[6] = {};
  for (int i = 0; i < 60000; ++i) {
    const int64_t v = rng.integer(0, 5);
    ASSERT_GE(v, 0);
    ASSERT_LE(v, 5);
    ++counts[v];
  }
  for (int count : counts) EXPECT_NEAR(count, 10000, 400);  // sd 91
  EXPECT_EQ(rng.integer(7, 7), 7);
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = rng.integer(-3, 1ll << 40);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 1ll << 40);
  }
  // A span of 0.375 * 2^64: plain modulo would put 56% of draws below the
  // midpoint; rejection keeps it at 50% (sd 0.5%).
  constexpr int64_t kHigh = 0x6000000000000000ll, kMid = kHigh / 2;
  int below = 0;
  for (int i = 0; i < 10000; ++i) below += rng.integer(0, kHigh) < kMid;
  EXPECT_NEAR(below, 5000, 250);
}

TEST(RandomSampleRng, UniformHas53BitsAndTheRightMoments) {
  SampleRng rng(3, 1, 4);
  double sum = 0, squares = 0;
  bool fine_bits = false;
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    squares += u * u;
    fine_bits |= std::fmod(u * 4294967296.0, 1.0) != 0;  // bits below 2^-32
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);          // sd 0.0009
  EXPECT_NEAR(squares / 100000, 1.0 / 3, 0.005);  // sd 0.0009
  EXPECT_TRUE(fine_bits);
  const double v = rng.uniform(2.0, 3.0);
  EXPECT_GE(v, 2.0);
  EXPECT_LT(v, 3.0);
}

TEST(RandomSampleRng, BernoulliRateIsP) {
  for (double p : {0.0, 0.1, 0.5, 1.0}) {
    SampleRng rng(11, 0, 0);
    int hits = 0;
    for (int i = 0; i < 10000; ++i) hits += rng.bernoulli(p);
    EXPECT_NEAR(hits / 10000.0, p, 0.02) << p;  // sd <= 0.005
  }
}

}  // namespace
}  // namespace ringloader
