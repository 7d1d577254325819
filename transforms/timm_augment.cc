// SPDX-License-Identifier: BSD-3-Clause
// Level functions in Python's double arithmetic, as timm writes them
// (level / 10. * range); ops through the PIL-exact kernels the torchvision
// family uses (affine.h, color_adjust.h, pil_ops.h).
#include "transforms/timm_augment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <utility>

#include "ringloader/errors.h"
#include "transforms/affine.h"
#include "transforms/color_adjust.h"
#include "transforms/pil_ops.h"

namespace ringloader::transforms {
namespace {

constexpr std::array<const char*, 24> kNames = {
    "AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "PosterizeIncreasing",
    "PosterizeOriginal", "Solarize", "SolarizeIncreasing", "SolarizeAdd", "Color",
    "ColorIncreasing", "Contrast", "ContrastIncreasing", "Brightness", "BrightnessIncreasing",
    "Sharpness", "SharpnessIncreasing", "ShearX", "ShearY", "TranslateX", "TranslateY",
    "TranslateXRel", "TranslateYRel"};
constexpr double kLevelDenom = 10.0;

bool is_geometric(TimmOp op) {
  switch (op) {
    case TimmOp::kRotate: case TimmOp::kShearX: case TimmOp::kShearY:
    case TimmOp::kTranslateX: case TimmOp::kTranslateY: case TimmOp::kTranslateXRel:
    case TimmOp::kTranslateYRel:
      return true;
    default:
      return false;
  }
}

// _randomly_negate: -v when random.random() > 0.5.
double negate(double v, SampleRng& rng) { return rng.uniform() > 0.5 ? -v : v; }

int posterize_level(double level) { return static_cast<int>(level / kLevelDenom * 4); }
int solarize_level(double level) {
  return std::min(256, static_cast<int>(level / kLevelDenom * 256));
}

// LEVEL_TO_ARG[name](level, hparams), drawing the sign where timm does.
double level_to_arg(const TimmAugmentParams& p, TimmOp op, double level, SampleRng& rng) {
  const double fraction = level / kLevelDenom;
  switch (op) {
    case TimmOp::kAutoContrast: case TimmOp::kEqualize: case TimmOp::kInvert: return 0;
    case TimmOp::kRotate: return negate(fraction * 30., rng);
    case TimmOp::kPosterize: return posterize_level(level);
    case TimmOp::kPosterizeIncreasing: return 4 - posterize_level(level);
    case TimmOp::kPosterizeOriginal: return posterize_level(level) + 4;
    case TimmOp::kSolarize: return solarize_level(level);
    case TimmOp::kSolarizeIncreasing: return 256 - solarize_level(level);
    case TimmOp::kSolarizeAdd: return std::min(128, static_cast<int>(fraction * 110));
    case TimmOp::kColor: case TimmOp::kContrast: case TimmOp::kBrightness:
    case TimmOp::kSharpness:
      return fraction * 1.8 + 0.1;
    case TimmOp::kColorIncreasing: case TimmOp::kContrastIncreasing:
    case TimmOp::kBrightnessIncreasing: case TimmOp::kSharpnessIncreasing:
      return std::max(0.1, 1.0 + negate(fraction * .9, rng));
    case TimmOp::kShearX: case TimmOp::kShearY: return negate(fraction * 0.3, rng);
    case TimmOp::kTranslateX: case TimmOp::kTranslateY:
      return negate(fraction * p.translate_const, rng);
    case TimmOp::kTranslateXRel: case TimmOp::kTranslateYRel:
      return negate(fraction * p.translate_pct, rng);
  }
  return 0;
}

// A standard normal (Box-Muller; 1 - uniform() keeps the log finite).
double normal(SampleRng& rng) {
  const double radius = std::sqrt(-2.0 * std::log(1.0 - rng.uniform()));
  return radius * std::cos(6.283185307179586 * rng.uniform());
}

// AugmentOp.__call__ after its probability draw: the noisy, clamped magnitude.
double draw_magnitude(const TimmAugmentParams& p, SampleRng& rng) {
  double m = p.magnitude;
  if (p.magnitude_uniform) {
    m = rng.uniform(0, m);
  } else if (p.magnitude_std > 0) {
    m += p.magnitude_std * normal(rng);
  }
  return std::max(0., std::min(m, p.magnitude_max));
}

void warp(Image& image, Image& scratch, const AffineMatrix& m, const TimmStep& step,
          const AugmentWarp& w) {
  affine_warp(image, image.height, image.width, m, step.filter, w.fill, scratch);
  std::swap(image, scratch);
}

// ImageOps.solarize's table with timm's solarize_add: v < thresh gains `add`.
void solarize_add(Image& image, int add, int thresh) {
  std::array<uint8_t, 256> table;
  for (int i = 0; i < 256; ++i) table[i] = static_cast<uint8_t>(i < thresh ? std::min(255, i + add) : i);
  for (uint8_t& v : image.pixels) v = table[v];
}

class TimmAugmentOp final : public ImageOp {
 public:
  explicit TimmAugmentOp(TimmAugmentParams params) : params_(std::move(params)) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    for (const TimmStep& step : draw_timm_augment(params_, rng)) {
      apply_timm_step(params_, step, in, out);
    }
  }
  std::pair<int, int> output_size(int height, int width) const override {
    return {height, width};
  }

 private:
  TimmAugmentParams params_;
};

TimmOp op_from_name(OpParams& p, const std::string& name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<TimmOp>(i);
  }
  p.fail("ops", "timm's RandAugment has no native op '" + name + "'");
}

}  // namespace

std::vector<TimmStep> draw_timm_augment(const TimmAugmentParams& p, SampleRng& rng) {
  std::vector<TimmOp> chosen;
  const int64_t last = static_cast<int64_t>(p.ops.size()) - 1;
  for (int i = 0; i < p.num_layers; ++i) chosen.push_back(p.ops[rng.integer(0, last)]);
  std::vector<TimmStep> steps;
  for (TimmOp op : chosen) {
    if (p.prob < 1.0 && rng.uniform() > p.prob) continue;
    TimmStep step{op, draw_magnitude(p, rng)};
    step.arg = level_to_arg(p, op, step.magnitude, rng);
    step.filter = p.warp.filter;
    if (is_geometric(op) && p.random_filter) {
      step.filter = rng.integer(0, 1) == 0 ? WarpFilter::kBilinear : WarpFilter::kBicubic;
    }
    steps.push_back(step);
  }
  return steps;
}

void apply_timm_step(const TimmAugmentParams& p, const TimmStep& step, Image& image,
                     Image& scratch) {
  const double a = step.arg;
  const auto f = static_cast<float>(a);  // ImageEnhance blends with a C float
  switch (step.op) {
    case TimmOp::kAutoContrast: autocontrast(image); break;
    case TimmOp::kEqualize: equalize(image); break;
    case TimmOp::kInvert: invert(image); break;
    case TimmOp::kRotate:
      pil_rotate(image, a, step.filter, false, std::nullopt, p.warp.fill, scratch);
      std::swap(image, scratch);
      break;
    case TimmOp::kPosterize: case TimmOp::kPosterizeIncreasing: case TimmOp::kPosterizeOriginal:
      // 0 bits (or fewer, from a huge M): Pillow <= 12's mask keeps nothing.
      if (a < 8) posterize(image, std::max(0, static_cast<int>(a)));
      break;
    case TimmOp::kSolarize: case TimmOp::kSolarizeIncreasing: solarize(image, a); break;
    case TimmOp::kSolarizeAdd: solarize_add(image, static_cast<int>(a), 128); break;
    case TimmOp::kColor: case TimmOp::kColorIncreasing: adjust_saturation(image, f); break;
    case TimmOp::kContrast: case TimmOp::kContrastIncreasing: adjust_contrast(image, f); break;
    case TimmOp::kBrightness: case TimmOp::kBrightnessIncreasing:
      adjust_brightness(image, f);
      break;
    case TimmOp::kSharpness: case TimmOp::kSharpnessIncreasing:
      adjust_sharpness(image, scratch, f);
      break;
    case TimmOp::kShearX: warp(image, scratch, {1, a, 0, 0, 1, 0}, step, p.warp); break;
    case TimmOp::kShearY: warp(image, scratch, {1, 0, 0, a, 1, 0}, step, p.warp); break;
    case TimmOp::kTranslateX: warp(image, scratch, {1, 0, a, 0, 1, 0}, step, p.warp); break;
    case TimmOp::kTranslateY: warp(image, scratch, {1, 0, 0, 0, 1, a}, step, p.warp); break;
    case TimmOp::kTranslateXRel:
      warp(image, scratch, {1, 0, a * image.width, 0, 1, 0}, step, p.warp);
      break;
    case TimmOp::kTranslateYRel:
      warp(image, scratch, {1, 0, 0, 0, 1, a * image.height}, step, p.warp);
      break;
  }
}

nlohmann::json timm_draw_json(const std::vector<TimmStep>& steps) {
  static const char* kFilters[] = {"nearest", "bilinear", "bicubic"};
  nlohmann::json out = nlohmann::json::array();
  for (const TimmStep& s : steps) {
    out.push_back({kNames.at(static_cast<size_t>(s.op)), s.magnitude, s.arg,
                   kFilters[static_cast<int>(s.filter)]});
  }
  return out;
}

TimmAugmentParams timm_augment_params(OpParams& p) {
  TimmAugmentParams out;
  std::stringstream names(p.text("ops"));
  for (std::string name; std::getline(names, name, ',');) {
    out.ops.push_back(op_from_name(p, name));
  }
  if (out.ops.empty()) p.fail("ops", "must name at least one op");
  out.num_layers = static_cast<int>(p.number("num_layers"));
  out.prob = p.number("prob");
  out.magnitude = p.number("magnitude");
  out.magnitude_std = p.number("magnitude_std");
  out.magnitude_uniform = p.boolean("magnitude_uniform");
  out.magnitude_max = p.number("magnitude_max");
  out.translate_const = p.number("translate_const");
  out.translate_pct = p.number("translate_pct");
  const std::string mode = p.choice("interpolation");
  out.random_filter = mode == "random";
  out.warp.filter = mode == "nearest" ? WarpFilter::kNearest
                    : mode == "bilinear" ? WarpFilter::kBilinear : WarpFilter::kBicubic;
  out.warp.fill = p.ints("fill", {1, 3}, false);
  for (int v : out.warp.fill) {
    if (v < 0 || v > 255) p.fail("fill", "values must be in [0, 255]");
  }
  return out;
}

std::unique_ptr<ImageOp> make_timm_augment(TimmAugmentParams params) {
  return std::make_unique<TimmAugmentOp>(std::move(params));
}

}  // namespace ringloader::transforms
