// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/tensor_augment_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "transforms/pil_ops.h"

namespace ringloader::transforms {
namespace {

constexpr double kRadiansToDegrees = 180.0 / 3.14159265358979323846;

// Tensor.to(uint8) of a clamped float: truncation.
uint8_t to_uint8(float v) {
  v = std::min(std::max(v, 0.0f), 255.0f);
  return static_cast<uint8_t>(v);
}

// _blend(img1, img2, ratio) for one value: ratio * a + (1 - ratio) * b in
// float32, the Python-double ratio and 1 - ratio each cast to float32.
struct Blend {
  float r, q;
  explicit Blend(double ratio)
      : r(static_cast<float>(ratio)), q(static_cast<float>(1.0 - ratio)) {}
  uint8_t operator()(float a, float b) const { return to_uint8(r * a + q * b); }
};

// rgb_to_grayscale on uint8: (0.2989 r + 0.587 g + 0.114 b).to(uint8).
uint8_t tensor_gray(const uint8_t* p) {
  const float v = 0.2989f * static_cast<float>(p[0]) + 0.587f * static_cast<float>(p[1]) +
                  0.114f * static_cast<float>(p[2]);
  return static_cast<uint8_t>(v);
}

void brightness(Image& image, double factor) {
  const Blend blend(factor);
  for (uint8_t& v : image.pixels) v = blend(v, 0.0f);
}

void saturation(Image& image, double factor) {
  if (image.channels != 3) return;  // torchvision returns 1-channel images
  const Blend blend(factor);
  uint8_t* p = image.pixels.data();
  for (size_t i = 0; i < image.pixels.size(); i += 3) {
    const float gray = tensor_gray(p + i);
    for (int c = 0; c < 3; ++c) p[i + c] = blend(p[i + c], gray);
  }
}

void contrast(Image& image, double factor) {
  // The mean of the grayscale image in float32 (its integer sum is exact
  // in float32 below 2^24; beyond, torch's own sum order decides).
  const size_t pixels = static_cast<size_t>(image.height) * image.width;
  uint64_t sum = 0;
  const uint8_t* p = image.pixels.data();
  for (size_t i = 0; i < pixels; ++i, p += image.channels) {
    sum += image.channels == 3 ? tensor_gray(p) : p[0];
  }
  const float mean = static_cast<float>(sum) / static_cast<float>(pixels);
  const Blend blend(factor);
  for (uint8_t& v : image.pixels) v = blend(v, mean);
}

// _blurred_degenerate_image: conv2d with (1 1 1 / 1 5 1 / 1 1 1) / 13 in
// float32, rounded half to even, on the interior; the border kept.
void sharpness(Image& image, Image& scratch, double factor) {
  if (image.width <= 2 || image.height <= 2) return;
  scratch = image;
  const int c = image.channels;
  const float side = 1.0f / 13.0f, centre = 5.0f / 13.0f;
  for (int y = 1; y < image.height - 1; ++y) {
    const uint8_t* rows[3] = {image.row(y - 1), image.row(y), image.row(y + 1)};
    uint8_t* out = scratch.row(y);
    for (int i = c; i < (image.width - 1) * c; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < 3; ++r) {
        for (int dx = -c; dx <= c; dx += c) {
          sum += static_cast<float>(rows[r][i + dx]) * (r == 1 && dx == 0 ? centre : side);
        }
      }
      out[i] = static_cast<uint8_t>(std::nearbyint(sum));
    }
  }
  const Blend blend(factor);
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    image.pixels[i] = blend(image.pixels[i], scratch.pixels[i]);
  }
}

void tensor_autocontrast(Image& image) {
  const int c = image.channels;
  std::array<float, 4> low{}, scale{};
  for (int ch = 0; ch < c; ++ch) {
    uint8_t lo = 255, hi = 0;
    for (size_t i = ch; i < image.pixels.size(); i += c) {
      lo = std::min(lo, image.pixels[i]);
      hi = std::max(hi, image.pixels[i]);
    }
    // scale = 255.0 / (max - min), which Tensor.__rtruediv__ computes as
    // reciprocal(max - min) * 255; not finite (max == min): min 0, scale 1.
    low[ch] = hi == lo ? 0.0f : static_cast<float>(lo);
    scale[ch] = hi == lo ? 1.0f
                         : (1.0f / (static_cast<float>(hi) - static_cast<float>(lo))) * 255.0f;
  }
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    const int ch = static_cast<int>(i % c);
    image.pixels[i] = to_uint8((static_cast<float>(image.pixels[i]) - low[ch]) * scale[ch]);
  }
}

// F_t.affine / F_t.rotate for an inverse matrix (torch's convention: about
// the image centre): theta in float32, the grid base_grid @ (theta^T /
// (w/2, h/2)), sampled at ((g + 1) * size/2 - 0.5).
void tensor_warp(Image& image, Image& out, const AffineMatrix& matrix, const TensorWarp& warp) {
  const int w = image.width, h = image.height, c = image.channels;
  float theta[6];
  for (int i = 0; i < 6; ++i) theta[i] = static_cast<float>(matrix[i]);
  const float half_w = static_cast<float>(0.5 * w), half_h = static_cast<float>(0.5 * h);
  const float rt[3][2] = {{theta[0] / half_w, theta[3] / half_h},
                          {theta[1] / half_w, theta[4] / half_h},
                          {theta[2] / half_w, theta[5] / half_h}};
  const std::vector<double> xs = torch_linspace(-w * 0.5 + 0.5, w * 0.5 + 0.5 - 1, w);
  const std::vector<double> ys = torch_linspace(-h * 0.5 + 0.5, h * 0.5 + 0.5 - 1, h);
  const float scale_x = static_cast<float>(w) / 2, scale_y = static_cast<float>(h) / 2;
  out.reshape(h, w, c);
  const bool masked = !warp.fill.empty();
  auto fill_of = [&](int ch) {
    return static_cast<float>(warp.fill.size() == 1 ? warp.fill[0] : warp.fill[ch]);
  };
  auto at = [&](int x, int y, int ch) -> float {
    if (x < 0 || x >= w || y < 0 || y >= h) return 0.0f;
    return ch < c ? static_cast<float>(image.row(y)[x * c + ch]) : 1.0f;  // ch == c: mask
  };
  for (int oy = 0; oy < h; ++oy) {
    const float yb = static_cast<float>(ys[oy]);
    for (int ox = 0; ox < w; ++ox) {
      const float xb = static_cast<float>(xs[ox]);
      const float gx = xb * rt[0][0] + yb * rt[1][0] + rt[2][0];
      const float gy = xb * rt[0][1] + yb * rt[1][1] + rt[2][1];
      // grid_sample's AVX2 kernel is built with FMA contraction: its
      // unnormalize and its bilinear sum are fused multiply-adds.
      const float x = std::fma(gx + 1.0f, scale_x, -0.5f);
      const float y = std::fma(gy + 1.0f, scale_y, -0.5f);
      float values[5];
      if (warp.bilinear) {
        const float xw = std::floor(x), yn = std::floor(y);
        const float we = x - xw, e = 1.0f - we, n = y - yn, s = 1.0f - n;
        const float nw = s * e, ne = s * we, sw = n * e, se = n * we;
        const int x0 = static_cast<int>(xw), y0 = static_cast<int>(yn);
        for (int ch = 0; ch <= c; ++ch) {
          float v = at(x0, y0, ch) * nw;
          v = std::fma(at(x0 + 1, y0, ch), ne, v);
          v = std::fma(at(x0, y0 + 1, ch), sw, v);
          values[ch] = std::fma(at(x0 + 1, y0 + 1, ch), se, v);
        }
      } else {
        const int xi = static_cast<int>(std::nearbyint(x)), yi = static_cast<int>(std::nearbyint(y));
        for (int ch = 0; ch <= c; ++ch) values[ch] = at(xi, yi, ch);
      }
      uint8_t* target = out.row(oy) + ox * c;
      for (int ch = 0; ch < c; ++ch) {
        float v = values[ch];
        if (masked) {
          const float mask = values[c];
          v = warp.bilinear ? v * mask + (1.0f - mask) * fill_of(ch)
                            : (mask < 0.5f ? fill_of(ch) : v);
        }
        target[ch] = to_uint8(std::nearbyint(v));
      }
    }
  }
  std::swap(image, out);
}

}  // namespace

void apply_tensor_augment_op(const AugmentStep& step, const TensorWarp& warp, Image& image,
                             Image& scratch) {
  const double m = step.magnitude;
  // F.affine's tensor path: the centre relative to the image centre.
  const std::array<double, 2> corner = {-image.width * 0.5, -image.height * 0.5};
  switch (step.op) {
    case AugmentOp::kIdentity: break;
    case AugmentOp::kShearX:
      tensor_warp(image, scratch,
                  inverse_affine_matrix(corner, 0.0, {0.0, 0.0}, 1.0,
                                        {std::atan(m) * kRadiansToDegrees, 0.0}),
                  warp);
      break;
    case AugmentOp::kShearY:
      tensor_warp(image, scratch,
                  inverse_affine_matrix(corner, 0.0, {0.0, 0.0}, 1.0,
                                        {0.0, std::atan(m) * kRadiansToDegrees}),
                  warp);
      break;
    case AugmentOp::kTranslateX:
      tensor_warp(image, scratch,
                  inverse_affine_matrix({0, 0}, 0.0, {std::trunc(m), 0.0}, 1.0, {0.0, 0.0}),
                  warp);
      break;
    case AugmentOp::kTranslateY:
      tensor_warp(image, scratch,
                  inverse_affine_matrix({0, 0}, 0.0, {0.0, std::trunc(m)}, 1.0, {0.0, 0.0}),
                  warp);
      break;
    case AugmentOp::kRotate:  // F.rotate passes -angle to the matrix
      tensor_warp(image, scratch, inverse_affine_matrix({0, 0}, -m, {0, 0}, 1.0, {0, 0}), warp);
      break;
    case AugmentOp::kBrightness: brightness(image, 1.0 + m); break;
    case AugmentOp::kColor: saturation(image, 1.0 + m); break;
    case AugmentOp::kContrast: contrast(image, 1.0 + m); break;
    case AugmentOp::kSharpness: sharpness(image, scratch, 1.0 + m); break;
    // Integer ops: the tensor forms equal PIL's tables.
    case AugmentOp::kPosterize: posterize(image, static_cast<int>(m)); break;
    case AugmentOp::kSolarize: solarize(image, m); break;
    case AugmentOp::kAutoContrast: tensor_autocontrast(image); break;
    case AugmentOp::kEqualize: equalize(image); break;
    case AugmentOp::kInvert: invert(image); break;
  }
}

}  // namespace ringloader::transforms
