// SPDX-License-Identifier: BSD-3-Clause
#include "ringloader/errors.h"

namespace ringloader {

std::string describe_sample(int64_t index, const std::string& source) {
  return "sample " + std::to_string(index) + " (" + source + ")";
}

}  // namespace ringloader
