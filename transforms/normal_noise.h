// SPDX-License-Identifier: BSD-3-Clause
// Standard normal noise in float32 for RandomErasing's value='random'
// (torchvision, and timm's mode='pixel'): tens of thousands of values per
// erased box, so it must be cheap. torch fills such tensors by Box-Muller on
// float32 uniforms (normal_fill); this does the same, with its own stream.
//
// The stream: Philox4x32-10 blocks (base/philox.h) keyed by a 64-bit value
// the sample's stream draws, counters 0, 1, 2, ... Blocks come in groups of
// 8; group g (blocks 8g..8g+7) gives values 32g..32g+31: block b's words
// (w0, w1, w2, w3) make two Box-Muller pairs, (w0, w1) -> values 32g+b
// (cos) and 32g+8+b (sin), (w2, w3) -> 32g+16+b and 32g+24+b. A word w
// gives the 24-bit uniform u = (w >> 8) / 2^24 in [0, 1); a pair (u1, u2) is
// sqrt(-2 log(1 - u1)) * (cos, sin)(2 pi u2), with log, cos and sin
// written out as float32 polynomials (Cephes' logf, sinf, cosf kernels).
//
// Two paths, AVX2 (8 blocks at once) and portable, give the same bytes:
// both use only IEEE float32 add, subtract, multiply and sqrt in the same
// order (the library builds with -ffp-contract=off), integer bit work and
// round-to-nearest. tests/unit/transforms/normal_noise_test.cc compares them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringloader::transforms {

// Writes `count` standard normals of the stream named by `key` to `out`.
void standard_normals(uint64_t key, float* out, size_t count);

// One Box-Muller pair from two words, as defined above (the portable path;
// exposed for the tests).
void box_muller_pair(uint32_t w1, uint32_t w2, float& cos_value, float& sin_value);

}  // namespace ringloader::transforms
