// SPDX-License-Identifier: BSD-3-Clause
// Counter-based randomness: Philox4x32-10 (Salmon et al., SC'11), the generator
// behind cuRAND and PyTorch's CUDA RNG. A stream is a pure function of its key,
// so a sample's augmentation depends only on (seed, epoch, sample index) and
// never on which worker decoded it or in what order. Implemented in
// base/random.cc (the lowest layer: the transforms draw from it, and so
// does the sampler).
#pragma once

#include <array>
#include <cstdint>

#include "ringloader/export.h"

namespace ringloader {

class RINGLOADER_EXPORT SampleRng {
 public:
  // The key of one sample's stream. `stream` separates independent users of
  // the same (seed, epoch, index), e.g. the sampler's shuffle from transforms.
  SampleRng(uint64_t seed, uint64_t epoch, uint64_t index, uint32_t stream = 0);

  uint32_t next_u32();
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits, like Python's random.random().
  double uniform();
  double uniform(double low, double high);
  // Uniform integer in [low, high] inclusive, without modulo bias.
  int64_t integer(int64_t low, int64_t high);
  // True with probability p.
  bool bernoulli(double p);

 private:
  void refill();
  std::array<uint32_t, 2> key_;
  std::array<uint32_t, 4> counter_;
  std::array<uint32_t, 4> block_{};
  int used_ = 4;
};

}  // namespace ringloader
