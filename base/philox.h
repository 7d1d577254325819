// SPDX-License-Identifier: BSD-3-Clause
// The Philox4x32-10 block function behind SampleRng, exposed so tests can
// check it against the published known-answer vectors (Random123).
#pragma once

#include <array>
#include <cstdint>

namespace ringloader::base {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key);

}  // namespace ringloader::base
