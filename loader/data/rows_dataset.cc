// SPDX-License-Identifier: BSD-3-Clause
// Dataset::tensor_rows: the public face of loader/data/tensor_rows.
#include <algorithm>
#include <climits>

#include "loader/data/tensor_rows.h"
#include "ringloader/dataset.h"

namespace ringloader {

Dataset Dataset::tensor_rows(const TensorRowsData& rows) {
  return from_rows(data::TensorRows::build(rows));
}

Dataset Dataset::tensor_rows(const std::string& memfd_path) {
  return from_rows(data::TensorRows::open(memfd_path));
}

Dataset Dataset::from_rows(std::shared_ptr<const data::TensorRows> rows) {
  Dataset dataset;
  dataset.kind_ = Kind::kRows;
  // The ring sizes a sample by its pipeline's output: an empty pipeline
  // over a 1 x row_bytes gray "image" is exactly one row's bytes. (Rows
  // are at most 2 GiB, which the header check keeps within an int.)
  static_assert(INT_MAX >= (int64_t{1} << 31) - 1);
  dataset.mode_ = ColorMode::kGray;
  dataset.image_height_ = 1;
  dataset.image_width_ = static_cast<int>(std::min<uint64_t>(rows->row_bytes(), INT_MAX));
  dataset.rows_ = std::move(rows);
  return dataset;
}

}  // namespace ringloader
