// SPDX-License-Identifier: BSD-3-Clause
// timm's ResizeKeepRatio (timm/data/transforms.py): resize so that the
// image's ratio to `size` (a blend of its larger and smaller side ratios by
// `longest`) becomes 1, optionally scaled (random_scale_*) and stretched
// (random_aspect_*) at random, then F.resize to the rounded size.
#pragma once

#include <array>
#include <memory>
#include <optional>

#include "transforms/compiled_pipeline.h"
#include "transforms/op_params.h"

namespace ringloader::transforms {

struct ResizeKeepRatioParams {
  int height = 0, width = 0;
  double longest = 0;
  std::optional<Interpolation> interpolation;  // empty: bilinear or bicubic at random
  double scale_prob = 0, aspect_prob = 0;
  std::array<double, 2> scale_range{0.85, 1.05}, aspect_range{0.9, 1.11};
  bool scale_area = false;
};

// get_params for an in_height x in_width image: the (height, width) to
// resize to. Draws, in timm's order and only where timm draws: a uniform
// (< scale_prob scales) then the factor; a uniform (< aspect_prob
// stretches) then a log-uniform aspect.
std::array<int, 2> keep_ratio_size(const ResizeKeepRatioParams& p, int in_height,
                                   int in_width, SampleRng& rng);

std::unique_ptr<ImageOp> make_resize_keep_ratio(OpParams& params);

}  // namespace ringloader::transforms
