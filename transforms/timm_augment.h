// SPDX-License-Identifier: BSD-3-Clause
// timm's RandAugment (timm/data/auto_augment.py, timm 1.0): a list of
// AugmentOps, num_layers of them drawn uniformly with replacement, each
// applied with probability `prob` at a magnitude with optional noise
// (mstd: Gaussian around it, or uniform in [0, magnitude] when infinite),
// clamped to [0, magnitude_max], turned into the op's argument by timm's
// level functions (the "Increasing" variants for `inc1`), on PIL images
// with timm's fill (img_mean) and resampling (fixed, or bilinear/bicubic at
// random per geometric op). Pixels are Pillow's for the same draws.
//
// Posterize to 0 bits (PosterizeIncreasing at magnitude 10, reached with
// mstd): Pillow up to 12 maps every value to 0 (ImageOps.posterize's mask
// ~(2**8 - 1)); Pillow 13 raises ValueError. The op does what Pillow <= 12
// does: a black image.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringloader/random.h"
#include "transforms/augment_ops.h"
#include "transforms/compiled_pipeline.h"
#include "transforms/op_params.h"

namespace ringloader::transforms {

enum class TimmOp {
  kAutoContrast, kEqualize, kInvert, kRotate, kPosterize, kPosterizeIncreasing,
  kPosterizeOriginal, kSolarize, kSolarizeIncreasing, kSolarizeAdd, kColor,
  kColorIncreasing, kContrast, kContrastIncreasing, kBrightness, kBrightnessIncreasing,
  kSharpness, kSharpnessIncreasing, kShearX, kShearY, kTranslateX, kTranslateY,
  kTranslateXRel, kTranslateYRel,
};

struct TimmAugmentParams {
  std::vector<TimmOp> ops;
  int num_layers = 2;
  double prob = 0.5;
  double magnitude = 10, magnitude_std = 0, magnitude_max = 10;
  bool magnitude_uniform = false;  // mstd > 100: uniform in [0, magnitude]
  double translate_const = 250, translate_pct = 0.45;
  bool random_filter = true;       // bilinear or bicubic per geometric op
  AugmentWarp warp;                // the fixed filter, and img_mean as fill
};

// One applied op: its argument as timm's level function returns it and the
// filter a geometric op resamples with.
struct TimmStep {
  TimmOp op;
  double magnitude = 0;  // after noise and clamping
  double arg = 0;
  WarpFilter filter = WarpFilter::kBicubic;
};

// Draws, in timm's order: num_layers op indices (uniform); then per op one
// uniform (skipped when > prob, if prob < 1), the magnitude noise (a
// Box-Muller normal, or a uniform), a sign for signed ops (negative when a
// uniform is > 0.5), and for geometric ops with random filters one index.
std::vector<TimmStep> draw_timm_augment(const TimmAugmentParams& params, SampleRng& rng);
void apply_timm_step(const TimmAugmentParams& params, const TimmStep& step, Image& image,
                     Image& scratch);
// [[name, magnitude, arg, filter], ...] per applied op.
nlohmann::json timm_draw_json(const std::vector<TimmStep>& steps);

TimmAugmentParams timm_augment_params(OpParams& params);
std::unique_ptr<ImageOp> make_timm_augment(TimmAugmentParams params);

}  // namespace ringloader::transforms
