// SPDX-License-Identifier: BSD-3-Clause
// Command line shared by the single-image probes: `[--limit N] FILE...`,
// read as up to N files spread evenly over the list (so a folder's classes
// are all represented when the limit is below its size).
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace ringloader::bench {

// Exits with status 2 and `usage` when no file is named.
inline std::vector<std::vector<unsigned char>> read_spread_files(int argc, char** argv,
                                                                 const char* usage) {
  size_t limit = 400;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
      limit = std::stoul(argv[++i]);
    } else {
      files.push_back(argv[i]);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s\n", usage);
    std::exit(2);
  }
  const size_t step = std::max<size_t>(1, files.size() / limit);
  std::vector<std::vector<unsigned char>> contents;
  for (size_t i = 0; i < files.size() && contents.size() < limit; i += step) {
    std::ifstream in(files[i], std::ios::binary);
    contents.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return contents;
}

}  // namespace ringloader::bench
