// SPDX-License-Identifier: BSD-3-Clause
// RandomRotation and RandomAffine: torchvision 0.14's parameters, random
// draws and PIL path over the warps of affine.h.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "ringloader/random.h"
#include "transforms/affine.h"
#include "transforms/compiled_pipeline.h"
#include "transforms/op_params.h"

namespace ringloader::transforms {

struct RotationParams {
  std::array<double, 2> degrees{0, 0};
  WarpFilter filter = WarpFilter::kNearest;
  bool expand = false;
  std::optional<std::array<double, 2>> center;
  std::vector<int> fill{0};
};

struct AffineParams {
  std::array<double, 2> degrees{0, 0};
  std::optional<std::array<double, 2>> translate;  // max fractions (x, y)
  std::optional<std::array<double, 2>> scale;      // (min, max)
  std::vector<double> shear;                       // empty, 2 or 4 values
  WarpFilter filter = WarpFilter::kNearest;
  std::vector<int> fill{0};
  std::optional<std::array<double, 2>> center;
};

// RandomAffine.get_params' result.
struct AffineDraw {
  double angle = 0;
  std::array<int, 2> translate{0, 0};
  double scale = 1;
  std::array<double, 2> shear{0, 0};
};

// RandomRotation.get_params: one uniform in degrees, rounded to float32.
double draw_rotation_angle(const RotationParams& params, SampleRng& rng);
// RandomAffine.get_params, drawing in torchvision's order, each value a
// float32 uniform: angle; tx then ty when translate is set (each rounded
// half to even, as Python's round); scale when set; shear x, then shear y
// when four shear values are given.
AffineDraw draw_affine(const AffineParams& params, int height, int width, SampleRng& rng);
// F.affine's PIL path for drawn parameters: the inverse matrix about the
// centre (width / 2, height / 2 unless `center` is set).
AffineMatrix affine_matrix_for(const AffineParams& params, const AffineDraw& draw,
                               int height, int width);

// Parameters read and validated as torchvision's constructors do, errors
// naming the op and parameter.
RotationParams rotation_params(OpParams& params);
AffineParams affine_params(OpParams& params);

std::unique_ptr<ImageOp> make_random_rotation(RotationParams params);
std::unique_ptr<ImageOp> make_random_affine(AffineParams params);

}  // namespace ringloader::transforms
