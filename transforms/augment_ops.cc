// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/augment_ops.h"

#include <array>
#include <cmath>
#include <utility>

#include "ringloader/errors.h"
#include "transforms/color_adjust.h"
#include "transforms/pil_ops.h"

namespace ringloader::transforms {
namespace {

constexpr std::array<const char*, 15> kNames = {
    "Identity", "ShearX",    "ShearY",    "TranslateX", "TranslateY",
    "Rotate",   "Brightness", "Color",    "Contrast",   "Sharpness",
    "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert"};

// CPython's math.degrees: x * (180 / pi).
constexpr double kRadiansToDegrees = 180.0 / 3.14159265358979323846;

// F.affine's PIL path with angle 0 and scale 1: Image.transform with the
// inverse matrix about `center`.
void pil_affine(Image& image, Image& scratch, const AugmentWarp& warp,
                std::array<double, 2> center, std::array<double, 2> translate,
                std::array<double, 2> shear) {
  const AffineMatrix matrix = inverse_affine_matrix(center, 0.0, translate, 1.0, shear);
  affine_warp(image, image.height, image.width, matrix, warp.filter, warp.fill, scratch);
  std::swap(image, scratch);
}

// _apply_op's shear: the magnitude is the tangent, F.affine takes degrees,
// about the top-left corner (center=[0, 0]).
double shear_degrees(double magnitude) { return std::atan(magnitude) * kRadiansToDegrees; }

// F.affine's translate for _apply_op's int(magnitude): Python's int()
// truncates toward zero.
double whole(double magnitude) { return std::trunc(magnitude); }

// 8 - (arange(n) / ((n - 1) / k)).round().int() as torch computes it:
// a float32 division, rounded half to even.
std::vector<double> posterize_bits(int top, int num_bins, double k) {
  std::vector<double> out;
  const float divisor = static_cast<float>((num_bins - 1) / k);
  for (int i = 0; i < num_bins; ++i) {
    out.push_back(top - std::nearbyint(static_cast<float>(i) / divisor));
  }
  return out;
}

}  // namespace

const char* augment_op_name(AugmentOp op) { return kNames.at(static_cast<size_t>(op)); }

AugmentOp augment_op_from_name(const std::string& name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<AugmentOp>(i);
  }
  throw Error("ringloader: the AutoAugment family has no op '" + name + "'");
}

void apply_augment_op(const AugmentStep& step, const AugmentWarp& warp, Image& image,
                      Image& scratch) {
  const double m = step.magnitude;
  const double cx = image.width * 0.5, cy = image.height * 0.5;
  switch (step.op) {
    case AugmentOp::kIdentity: break;
    case AugmentOp::kShearX:
      pil_affine(image, scratch, warp, {0, 0}, {0, 0}, {shear_degrees(m), 0.0});
      break;
    case AugmentOp::kShearY:
      pil_affine(image, scratch, warp, {0, 0}, {0, 0}, {0.0, shear_degrees(m)});
      break;
    case AugmentOp::kTranslateX:
      pil_affine(image, scratch, warp, {cx, cy}, {whole(m), 0}, {0.0, 0.0});
      break;
    case AugmentOp::kTranslateY:
      pil_affine(image, scratch, warp, {cx, cy}, {0, whole(m)}, {0.0, 0.0});
      break;
    case AugmentOp::kRotate:
      pil_rotate(image, m, warp.filter, false, std::nullopt, warp.fill, scratch);
      std::swap(image, scratch);
      break;
    // ImageEnhance takes the factor as a double and blends in float32.
    case AugmentOp::kBrightness: adjust_brightness(image, static_cast<float>(1.0 + m)); break;
    case AugmentOp::kColor: adjust_saturation(image, static_cast<float>(1.0 + m)); break;
    case AugmentOp::kContrast: adjust_contrast(image, static_cast<float>(1.0 + m)); break;
    case AugmentOp::kSharpness:
      adjust_sharpness(image, scratch, static_cast<float>(1.0 + m));
      break;
    case AugmentOp::kPosterize: posterize(image, static_cast<int>(m)); break;
    case AugmentOp::kSolarize: solarize(image, m); break;
    case AugmentOp::kAutoContrast: autocontrast(image); break;
    case AugmentOp::kEqualize: equalize(image); break;
    case AugmentOp::kInvert: invert(image); break;
  }
}

std::vector<double> torch_linspace(double start_value, double end_value, int steps) {
  const float start = static_cast<float>(start_value), end = static_cast<float>(end_value);
  if (steps == 1) return {start};
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int halfway = steps / 2;
  auto base = [&](int i) {
    return i < halfway ? std::fma(step, static_cast<float>(i), start)
                       : std::fma(-step, static_cast<float>(steps - i - 1), end);
  };
  std::vector<double> out;
  constexpr int kLanes = 8;  // Vectorized<float>::size() with AVX2
  const int vectorized = steps / (2 * kLanes) * (2 * kLanes);
  for (int i = 0; i < vectorized; i += kLanes) {
    const float first = base(i);
    for (int k = 0; k < kLanes; ++k) {
      const float lane = static_cast<float>(k) * step;
      out.push_back(first + lane);
    }
  }
  for (int i = vectorized; i < steps; ++i) out.push_back(base(i));
  return out;
}

AugmentSpace augmentation_space(AugmentFamily family, int num_bins, int height, int width,
                                bool all_ops) {
  using Op = AugmentOp;
  const auto lin = [num_bins](double end) { return torch_linspace(0.0, end, num_bins); };
  const std::vector<double> none;
  const std::vector<double> solarize = torch_linspace(255.0, 0.0, num_bins);
  switch (family) {
    case AugmentFamily::kAutoAugment:
    case AugmentFamily::kRandAugment: {
      AugmentSpace space = {
          {Op::kShearX, lin(0.3), true},
          {Op::kShearY, lin(0.3), true},
          {Op::kTranslateX, lin(150.0 / 331.0 * width), true},
          {Op::kTranslateY, lin(150.0 / 331.0 * height), true},
          {Op::kRotate, lin(30.0), true},
          {Op::kBrightness, lin(0.9), true},
          {Op::kColor, lin(0.9), true},
          {Op::kContrast, lin(0.9), true},
          {Op::kSharpness, lin(0.9), true},
          {Op::kPosterize, posterize_bits(8, num_bins, 4), false},
          {Op::kSolarize, solarize, false},
          {Op::kAutoContrast, none, false},
          {Op::kEqualize, none, false}};
      if (family == AugmentFamily::kAutoAugment) {
        space.push_back({Op::kInvert, none, false});
      } else {
        space.insert(space.begin(), {Op::kIdentity, none, false});
      }
      return space;
    }
    case AugmentFamily::kTrivialAugmentWide:
      return {{Op::kIdentity, none, false},
              {Op::kShearX, lin(0.99), true},
              {Op::kShearY, lin(0.99), true},
              {Op::kTranslateX, lin(32.0), true},
              {Op::kTranslateY, lin(32.0), true},
              {Op::kRotate, lin(135.0), true},
              {Op::kBrightness, lin(0.99), true},
              {Op::kColor, lin(0.99), true},
              {Op::kContrast, lin(0.99), true},
              {Op::kSharpness, lin(0.99), true},
              {Op::kPosterize, posterize_bits(8, num_bins, 6), false},
              {Op::kSolarize, solarize, false},
              {Op::kAutoContrast, none, false},
              {Op::kEqualize, none, false}};
    case AugmentFamily::kAugMix: {
      AugmentSpace space = {
          {Op::kShearX, lin(0.3), true},
          {Op::kShearY, lin(0.3), true},
          {Op::kTranslateX, lin(width / 3.0), true},
          {Op::kTranslateY, lin(height / 3.0), true},
          {Op::kRotate, lin(30.0), true},
          {Op::kPosterize, posterize_bits(4, num_bins, 4), false},
          {Op::kSolarize, solarize, false},
          {Op::kAutoContrast, none, false},
          {Op::kEqualize, none, false}};
      if (all_ops) {
        for (Op op : {Op::kBrightness, Op::kColor, Op::kContrast, Op::kSharpness}) {
          space.push_back({op, lin(0.9), true});
        }
      }
      return space;
    }
  }
  return {};
}

}  // namespace ringloader::transforms
