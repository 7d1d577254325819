// SPDX-License-Identifier: BSD-3-Clause
// ColorJitter, Grayscale and RandomGrayscale: torchvision 0.14's transforms
// over the PIL-exact functions of color_adjust.h.
#pragma once

#include <array>
#include <memory>
#include <optional>

#include "ringloader/random.h"
#include "transforms/compiled_pipeline.h"
#include "transforms/op_params.h"

namespace ringloader::transforms {

// ColorJitter's adjustments, indexed by torchvision's fn_id.
enum ColorFn { kBrightness = 0, kContrast = 1, kSaturation = 2, kHue = 3 };

// [min, max] per fn_id; empty when the transform leaves that one alone
// (torchvision's None: 0, or a range of exactly (1, 1), or (0, 0) for hue).
using ColorJitterRanges = std::array<std::optional<std::array<double, 2>>, 4>;

struct ColorJitterDraw {
  std::array<int, 4> order{0, 1, 2, 3};         // fn ids, applied left to right
  std::array<std::optional<double>, 4> factors;  // per fn id; empty = skipped
};

// ColorJitter.get_params from the sample's stream. Draws, in this order:
// the permutation (Fisher-Yates on [0, 1, 2, 3]: rng.integer(0, i) for
// i = 3, 2, 1, swapping positions i and j), then one uniform per present
// range in fn-id order (brightness, contrast, saturation, hue), each
// rounded to float32 as torch's uniform_ on a float tensor is.
ColorJitterDraw draw_color_jitter(const ColorJitterRanges& ranges, SampleRng& rng);
// The forward pass for drawn parameters (F.adjust_* in `order`).
void apply_color_jitter(const ColorJitterDraw& draw, Image& image);

// ColorJitter's four parameters read as its _check_input does: a number v
// means [max(0, 1 - v), 1 + v] ([-v, v] for hue), a pair is (min, max)
// within [0, inf) ([-0.5, 0.5] for hue); a range that changes nothing is
// left empty.
ColorJitterRanges color_jitter_ranges(OpParams& params);

std::unique_ptr<ImageOp> make_color_jitter(const ColorJitterRanges& ranges);
// Grayscale(num_output_channels): always `channels` (1 or 3) out.
std::unique_ptr<ImageOp> make_grayscale(int channels);
// RandomGrayscale(p): keeps the channel count. Draws one uniform (< p).
std::unique_ptr<ImageOp> make_random_grayscale(double p);

}  // namespace ringloader::transforms
