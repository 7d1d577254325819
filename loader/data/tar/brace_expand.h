// SPDX-License-Identifier: BSD-3-Clause
// Shard URL patterns like WebDataset's (Python braceexpand): numeric ranges
// "train-{0000..0099}.tar" keep the zero padding, lists "{train,val}" pick
// alternatives, several groups multiply left to right.
#pragma once

#include <string>
#include <vector>

namespace ringloader::data {

// Expands every brace group of `pattern`. Text without braces comes back as
// one element. Throws OptionError for an unbalanced brace or a range whose
// ends are not both integers (or that lists more than 10 million names).
std::vector<std::string> expand_braces(const std::string& pattern);

}  // namespace ringloader::data
