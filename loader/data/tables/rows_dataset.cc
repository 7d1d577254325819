// SPDX-License-Identifier: BSD-3-Clause
// Dataset::tensor_rows: the public face of loader/data/tables/tensor_rows.
#include <climits>
#include <string>

#include "loader/data/tables/tensor_rows.h"
#include "ringloader/dataset.h"
#include "ringloader/errors.h"

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
  // over a 1 x row_bytes gray "image" is exactly one row's bytes. (The
  // header check keeps rows within INT_MAX bytes; a width that differed
  // would size the slot short of a row.)
  if (rows->row_bytes() > static_cast<uint64_t>(INT_MAX)) {
    throw IoError("ringloader: tensor rows of " + std::to_string(rows->row_bytes()) +
                  " bytes do not fit a ring sample");
  }
  dataset.mode_ = ColorMode::kGray;
  dataset.image_height_ = 1;
  dataset.image_width_ = static_cast<int>(rows->row_bytes());
  dataset.rows_ = std::move(rows);
  return dataset;
}

}  // namespace ringloader
