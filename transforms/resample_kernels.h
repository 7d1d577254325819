// SPDX-License-Identifier: BSD-3-Clause
// The two passes of Pillow's separable resampler, shared by the portable
// loops (resample.cc) and the AVX2 ones (resample_avx2.cc, vertical;
// resample_horizontal_avx2.cc, horizontal). Both compute
// Pillow's exact integer sums, so they give identical bytes; AVX2 is picked
// at run time when the CPU has it.
#pragma once

#include <cstdint>
#include <vector>

#include "transforms/image.h"
#include "transforms/resample.h"

namespace ringloader::transforms {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS

// For each output index: the first input index, how many inputs, and their
// fixed-point weights (Pillow's precompute_coeffs + normalize_coeffs_8bpc).
struct Coefficients {
  int taps = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;  // out_size * taps, zero past count
};

inline uint8_t clip8(int32_t value) {
  if (value >= (1 << kPrecisionBits << 8)) return 255;
  if (value <= 0) return 0;
  return static_cast<uint8_t>(value >> kPrecisionBits);
}

// True when this CPU runs the AVX2 kernels (checked once) and they are
// allowed; tests turn them off to compare with the portable loops.
bool have_avx2();
void allow_simd(bool allowed);

// Horizontal pass over rows [row_begin, row_begin + rows) of `in` into the
// rows of `out`; RGB images only. False if not handled.
bool horizontal_pass_avx2(const ImageView& in, int row_begin, int rows,
                          const Coefficients& c, Image& out);
// Vertical pass: rows of `in` are relative to `first_row`. False if not
// handled.
bool vertical_pass_avx2(const ImageView& in, int first_row, const Coefficients& c,
                        Image& out);

}  // namespace ringloader::transforms
