// SPDX-License-Identifier: BSD-3-Clause
// What a tar index holds, as JSON to compare two of them by: its
// description without the names of its table's memfd (each index that
// builds or maps a table has its own descriptor), plus every sample read
// back from the table.
#pragma once

#include <nlohmann/json.hpp>

#include "loader/data/tar/tar_index.h"

namespace ringloader::data {

inline nlohmann::json index_contents(const TarIndex& index) {
  nlohmann::json out = index.to_json();
  out.erase("table");
  out.erase("manifest");
  nlohmann::json samples = nlohmann::json::array();
  for (int64_t i = 0; i < index.size(); ++i) {
    const TarSample s = index.sample(i);
    samples.push_back({s.shard, s.offset, s.size, s.label, s.image_name});
  }
  out["samples"] = std::move(samples);
  return out;
}

}  // namespace ringloader::data
