// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/affine_ops.h"

#include <cmath>
#include <string>
#include <utility>

namespace ringloader::transforms {
namespace {

// torch's uniform_ on a float32 tensor, as a Python float.
double uniform_float32(SampleRng& rng, double low, double high) {
  return static_cast<double>(static_cast<float>(rng.uniform(low, high)));
}

// A parameter that may be absent or null (torchvision's None).
std::optional<std::vector<double>> optional_numbers(OpParams& p, const std::string& key,
                                                    const std::set<size_t>& counts) {
  if (!p.present(key)) return std::nullopt;  // torchvision's None
  return p.numbers(key, counts);
}

std::optional<std::array<double, 2>> optional_pair(OpParams& p, const std::string& key) {
  auto values = optional_numbers(p, key, {2});
  if (!values) return std::nullopt;
  return std::array<double, 2>{(*values)[0], (*values)[1]};
}

// _setup_angle: a number x >= 0 means (-x, x); otherwise (min, max) pairs.
std::vector<double> angle_ranges(OpParams& p, const std::string& key,
                                 std::vector<double> values) {
  for (double v : values) {
    // Drawn as float32, like torch: the range must be finite there.
    if (!std::isfinite(static_cast<float>(v))) p.fail(key, "must be finite in float32");
  }
  if (values.size() == 1) {
    if (values[0] < 0) p.fail(key, "must not be negative when a single number");
    return {-values[0], values[0]};
  }
  for (size_t i = 0; i + 1 < values.size(); i += 2) {
    if (values[i] > values[i + 1]) p.fail(key, "ranges must be (min, max)");
  }
  return values;
}

std::array<double, 2> degrees(OpParams& p) {
  auto range = angle_ranges(p, "degrees", p.numbers("degrees", {1, 2}));
  return {range[0], range[1]};
}

WarpFilter filter(OpParams& p) {
  switch (interpolation_from_name(p.choice("interpolation"))) {
    case Interpolation::kBilinear: return WarpFilter::kBilinear;
    case Interpolation::kBicubic: return WarpFilter::kBicubic;
    case Interpolation::kNearest: break;
  }
  return WarpFilter::kNearest;
}

// _parse_fill: int(x) per value, one value or one per channel.
std::vector<int> fill(OpParams& p) {
  std::vector<int> out;
  for (double v : p.numbers("fill", {1, 3})) {
    if (!int_fits_uint8(v)) p.fail("fill", "values must be in [0, 255]");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

class RandomRotation final : public ImageOp {
 public:
  explicit RandomRotation(RotationParams params) : params_(std::move(params)) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    const double angle = draw_rotation_angle(params_, rng);
    pil_rotate(in, angle, params_.filter, params_.expand, params_.center, params_.fill, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    if (!params_.expand) return {height, width};
    // Expanding: the size follows the angle, so it is known only for a
    // fixed angle and a fixed input size.
    if (height <= 0 || width <= 0 || params_.degrees[0] != params_.degrees[1]) return {0, 0};
    const double angle = static_cast<float>(params_.degrees[0]);
    return rotated_size(height, width, angle, true, params_.center);
  }

 private:
  RotationParams params_;
};

class RandomAffine final : public ImageOp {
 public:
  explicit RandomAffine(AffineParams params) : params_(std::move(params)) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    const AffineDraw draw = draw_affine(params_, in.height, in.width, rng);
    const AffineMatrix matrix = affine_matrix_for(params_, draw, in.height, in.width);
    affine_warp(in, in.height, in.width, matrix, params_.filter, params_.fill, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    return {height, width};
  }

 private:
  AffineParams params_;
};

}  // namespace

double draw_rotation_angle(const RotationParams& params, SampleRng& rng) {
  return uniform_float32(rng, params.degrees[0], params.degrees[1]);
}

AffineDraw draw_affine(const AffineParams& params, int height, int width, SampleRng& rng) {
  AffineDraw draw;
  draw.angle = uniform_float32(rng, params.degrees[0], params.degrees[1]);
  if (params.translate) {
    const double max_dx = (*params.translate)[0] * width;
    const double max_dy = (*params.translate)[1] * height;
    draw.translate[0] = static_cast<int>(std::nearbyint(uniform_float32(rng, -max_dx, max_dx)));
    draw.translate[1] = static_cast<int>(std::nearbyint(uniform_float32(rng, -max_dy, max_dy)));
  }
  if (params.scale) draw.scale = uniform_float32(rng, (*params.scale)[0], (*params.scale)[1]);
  if (!params.shear.empty()) {
    draw.shear[0] = uniform_float32(rng, params.shear[0], params.shear[1]);
    if (params.shear.size() == 4) {
      draw.shear[1] = uniform_float32(rng, params.shear[2], params.shear[3]);
    }
  }
  return draw;
}

AffineMatrix affine_matrix_for(const AffineParams& params, const AffineDraw& draw,
                               int height, int width) {
  const std::array<double, 2> center =
      params.center ? *params.center : std::array<double, 2>{width * 0.5, height * 0.5};
  return inverse_affine_matrix(center, draw.angle,
                               {static_cast<double>(draw.translate[0]),
                                static_cast<double>(draw.translate[1])},
                               draw.scale, draw.shear);
}

RotationParams rotation_params(OpParams& p) {
  RotationParams out;
  out.degrees = degrees(p);
  out.filter = filter(p);
  out.expand = p.boolean("expand");
  out.center = optional_pair(p, "center");
  out.fill = fill(p);
  return out;
}

AffineParams affine_params(OpParams& p) {
  AffineParams out;
  out.degrees = degrees(p);
  out.translate = optional_pair(p, "translate");
  if (out.translate) {
    for (double t : *out.translate) {
      if (!(t >= 0.0 && t <= 1.0)) p.fail("translate", "values must be in [0, 1]");
    }
  }
  out.scale = optional_pair(p, "scale");
  if (out.scale) {
    const float low = static_cast<float>((*out.scale)[0]);
    const float high = static_cast<float>((*out.scale)[1]);
    if (!(low > 0 && std::isfinite(high))) p.fail("scale", "must be positive (in float32)");
    if ((*out.scale)[0] > (*out.scale)[1]) p.fail("scale", "must be (min, max)");
  }
  if (auto shear = optional_numbers(p, "shear", {1, 2, 4})) {
    out.shear = angle_ranges(p, "shear", *shear);
  }
  out.filter = filter(p);
  out.fill = fill(p);
  out.center = optional_pair(p, "center");
  return out;
}

std::unique_ptr<ImageOp> make_random_rotation(RotationParams params) {
  return std::make_unique<RandomRotation>(std::move(params));
}
std::unique_ptr<ImageOp> make_random_affine(AffineParams params) {
  return std::make_unique<RandomAffine>(std::move(params));
}

}  // namespace ringloader::transforms
