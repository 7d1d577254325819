// SPDX-License-Identifier: BSD-3-Clause
// Expressions keep Python's and Pillow's evaluation order (a * x + b * y + c
// is (a * x + b * y) + c, accumulators are advanced by addition rather than
// recomputed): a different rounding moves a sample across a pixel edge.
#include "transforms/affine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "transforms/affine_kernels.h"

namespace ringloader::transforms {
namespace {

// CPython's math.radians: x * (pi / 180).
constexpr double kDegreesToRadians = 3.14159265358979323846 / 180.0;

// Pillow's COORD and FLOOR macros, except that values no int can hold (huge
// or NaN, from extreme shears or scales) map outside every image instead of
// being undefined behaviour.
int coord(double v) {
  if (v < 0.0) return -1;
  return v < 2147483647.0 ? static_cast<int>(v) : std::numeric_limits<int>::max();
}

// Python's float % (the result takes the divisor's sign).
double python_mod(double x, double m) {
  double r = std::fmod(x, m);
  if (r != 0.0) {
    if ((m < 0) != (r < 0)) r += m;
  } else {
    r = std::copysign(0.0, m);
  }
  return r;
}

// Python's round(x, 15): correctly rounded to 15 decimals, read back.
double round15(double x) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.15f", x);
  return std::strtod(text, nullptr);
}

std::array<double, 2> apply(const AffineMatrix& m, double x, double y) {
  return {m[0] * x + m[1] * y + m[2], m[3] * x + m[4] * y + m[5]};
}

void fill_with(Image& out, const std::vector<int>& fill) {
  const int c = out.channels;
  uint8_t colour[4];
  for (int i = 0; i < c; ++i) {
    colour[i] = static_cast<uint8_t>(fill.size() == 1 ? fill[0] : fill[i]);
  }
  if (std::all_of(colour, colour + c, [&](uint8_t v) { return v == colour[0]; })) {
    std::memset(out.pixels.data(), colour[0], out.pixels.size());
    return;
  }
  // One row pixel by pixel, the others copied from it.
  if (out.height == 0) return;
  for (int x = 0; x < out.width; ++x) std::memcpy(out.row(0) + x * c, colour, c);
  for (int y = 1; y < out.height; ++y) std::memcpy(out.row(y), out.row(0), out.row_bytes());
}

void copy_pixel(const Image& in, int y, int x, uint8_t* target) {
  std::memcpy(target, in.row(y) + x * in.channels, in.channels);
}

// ImagingScaleAffine: no rotation or shear, nearest neighbour.
void scale_affine(const Image& in, const AffineMatrix& a, Image& out) {
  const int c = in.channels;
  std::vector<int> columns(out.width, 0);  // calloc'ed in Pillow
  double xo = a[2] + a[0] * 0.5;
  double yo = a[5] + a[4] * 0.5;
  int xmin = out.width, xmax = 0;
  for (int x = 0; x < out.width; ++x) {
    const int xin = coord(xo);
    if (xin >= 0 && xin < in.width) {
      xmax = x + 1;
      if (x < xmin) xmin = x;
      columns[x] = xin;
    }
    xo += a[0];
  }
  for (int y = 0; y < out.height; ++y) {
    const int yi = coord(yo);
    if (yi >= 0 && yi < in.height) {
      for (int x = xmin; x < xmax; ++x) copy_pixel(in, yi, columns[x], out.row(y) + x * c);
    }
    yo += a[4];
  }
}

bool fits_fixed_point(const AffineMatrix& a, int x, int y) {
  return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 &&
         std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

// affine_fixed: 16.16 fixed point, rows and columns advanced by addition.
void affine_fixed(const Image& in, const AffineMatrix& a, Image& out) {
  auto fix = [](double v) { return pil_floor(v * 65536.0 + 0.5); };
  const int a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
  int a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5);
  int a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
  const int c = in.channels;
  for (int y = 0; y < out.height; ++y) {
    int xx = a2, yy = a5;
    uint8_t* target = out.row(y);
    for (int x = 0; x < out.width; ++x, target += c) {
      const int xin = xx >> 16;  // arithmetic shift: floor, as in Pillow
      if (xin >= 0 && xin < in.width) {
        const int yin = yy >> 16;
        if (yin >= 0 && yin < in.height) copy_pixel(in, yin, xin, target);
      }
      xx += a0;
      yy += a3;
    }
    a2 += a1;
    a5 += a4;
  }
}

// The double-precision loop Pillow falls back to for far-off coordinates.
void affine_float(const Image& in, const AffineMatrix& a, Image& out) {
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
  double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  const int c = in.channels;
  for (int y = 0; y < out.height; ++y) {
    double xx = xo, yy = yo;
    uint8_t* target = out.row(y);
    for (int x = 0; x < out.width; ++x, target += c) {
      const int xin = coord(xx);
      if (xin >= 0 && xin < in.width) {
        const int yin = coord(yy);
        if (yin >= 0 && yin < in.height) copy_pixel(in, yin, xin, target);
      }
      xx += a[0];
      yy += a[3];
    }
    xo += a[1];
    yo += a[4];
  }
}

// ImagingGenericTransform's loop: each output pixel centre maps through the
// matrix; one whose source lies outside the image keeps the fill, the others
// get the filter (affine_kernels.h).
template <typename Filter>
void for_each_source_point(const Image& in, const AffineMatrix& a, Image& out,
                           const Filter& filter) {
  const int c = in.channels;
  for (int y = 0; y < out.height; ++y) {
    uint8_t* target = out.row(y);
    for (int x = 0; x < out.width; ++x, target += c) {
      const SourcePoint p = source_point(a, x, y);
      if (inside(p, in)) filter(in, p, target);
    }
  }
}

// A matrix that moves by whole pixels (AutoAugment's TranslateX/Y: F.affine
// about the centre with an int() translation gives a2 = -tx exactly):
// every source point is a pixel centre, so each filter returns that pixel
// (bilinear and bicubic weigh it by 1 and its neighbours by 0, nearest
// picks it). A copy of each row's part that lands in the image.
bool whole_pixel_shift(const AffineMatrix& a) {
  auto whole = [](double v) { return std::fabs(v) < 1e8 && v == std::trunc(v); };
  return a[0] == 1.0 && a[1] == 0.0 && a[3] == 0.0 && a[4] == 1.0 && whole(a[2]) &&
         whole(a[5]);
}

void shift_copy(const Image& in, const AffineMatrix& a, Image& out) {
  const int dx = static_cast<int>(a[2]), dy = static_cast<int>(a[5]);
  const int c = in.channels;
  // Output columns [x0, x1) read input columns [x0 + dx, x1 + dx).
  const int x0 = std::max(0, -dx), x1 = std::min(out.width, in.width - dx);
  if (x1 <= x0) return;
  for (int y = std::max(0, -dy); y < std::min(out.height, in.height - dy); ++y) {
    std::memcpy(out.row(y) + static_cast<size_t>(x0) * c,
                in.row(y + dy) + static_cast<size_t>(x0 + dx) * c,
                static_cast<size_t>(x1 - x0) * c);
  }
}

// Image.transpose(ROTATE_90 / ROTATE_180 / ROTATE_270); `quarter` 1, 2, 3.
void transpose_rotate(const Image& in, int quarter, Image& out) {
  const int h = in.height, w = in.width, c = in.channels;
  if (quarter == 2) {
    out.reshape(h, w, c);
  } else {
    out.reshape(w, h, c);
  }
  for (int y = 0; y < out.height; ++y) {
    uint8_t* target = out.row(y);
    for (int x = 0; x < out.width; ++x, target += c) {
      if (quarter == 1) copy_pixel(in, x, w - 1 - y, target);
      if (quarter == 2) copy_pixel(in, h - 1 - y, w - 1 - x, target);
      if (quarter == 3) copy_pixel(in, h - 1 - x, y, target);
    }
  }
}

// What Image.rotate decides: a shortcut (quarter turns 0..3), or a matrix
// and output size.
struct RotationPlan {
  int quarter = -1;  // -1: warp with `matrix`
  AffineMatrix matrix{};
  int height = 0, width = 0;
};

RotationPlan plan_rotation(int height, int width, double angle, bool expand,
                           const std::optional<std::array<double, 2>>& center) {
  RotationPlan plan;
  plan.height = height;
  plan.width = width;
  angle = python_mod(angle, 360.0);
  if (!center) {
    if (angle == 0) plan.quarter = 0;
    if (angle == 180) plan.quarter = 2;
    if ((angle == 90 || angle == 270) && (expand || width == height)) {
      plan.quarter = angle == 90 ? 1 : 3;
      std::swap(plan.height, plan.width);
    }
    if (plan.quarter >= 0) return plan;
  }
  const double cx = center ? (*center)[0] : width / 2.0;
  const double cy = center ? (*center)[1] : height / 2.0;
  const double radians = -(angle * kDegreesToRadians);
  AffineMatrix& m = plan.matrix;
  m = {round15(std::cos(radians)), round15(std::sin(radians)), 0.0,
       round15(-std::sin(radians)), round15(std::cos(radians)), 0.0};
  const auto shift = apply(m, -cx, -cy);
  m[2] = shift[0] + cx;
  m[5] = shift[1] + cy;
  if (expand) {
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    const std::pair<int, int> corners[] = {{0, 0}, {width, 0}, {width, height}, {0, height}};
    for (const auto& [x, y] : corners) {
      const auto p = apply(m, x, y);
      xmin = std::min(xmin, p[0]);
      xmax = std::max(xmax, p[0]);
      ymin = std::min(ymin, p[1]);
      ymax = std::max(ymax, p[1]);
    }
    // The rotated box is at most width + height wide (NaN only from a
    // non-finite angle, which the parameters refuse).
    const int nw = static_cast<int>(std::min(std::ceil(xmax) - std::floor(xmin), 2.0 * (width + height)));
    const int nh = static_cast<int>(std::min(std::ceil(ymax) - std::floor(ymin), 2.0 * (width + height)));
    const auto moved = apply(m, -static_cast<double>(nw - width) / 2.0,
                             -static_cast<double>(nh - height) / 2.0);
    m[2] = moved[0];
    m[5] = moved[1];
    plan.width = nw;
    plan.height = nh;
  }
  return plan;
}

}  // namespace

AffineMatrix inverse_affine_matrix(std::array<double, 2> center, double angle,
                                   std::array<double, 2> translate, double scale,
                                   std::array<double, 2> shear) {
  const double rot = angle * kDegreesToRadians;
  const double sx = shear[0] * kDegreesToRadians;
  const double sy = shear[1] * kDegreesToRadians;
  const double cx = center[0], cy = center[1];
  const double tx = translate[0], ty = translate[1];
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  AffineMatrix m = {d, -b, 0.0, -c, a, 0.0};
  for (double& v : m) v /= scale;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  return m;
}

void affine_warp(const Image& in, int height, int width, const AffineMatrix& matrix,
                 WarpFilter filter, const std::vector<int>& fill, Image& out) {
  out.reshape(height, width, in.channels);
  fill_with(out, fill);
  if (whole_pixel_shift(matrix)) {
    shift_copy(in, matrix, out);
  } else if (filter == WarpFilter::kBilinear) {
    if (!affine_bilinear_avx2(in, matrix, out)) for_each_source_point(in, matrix, out, bilinear_pixel);
  } else if (filter == WarpFilter::kBicubic) {
    if (!affine_bicubic_avx2(in, matrix, out)) for_each_source_point(in, matrix, out, bicubic_pixel);
  } else if (matrix[1] == 0 && matrix[3] == 0) {
    scale_affine(in, matrix, out);
  } else if (fits_fixed_point(matrix, 0, 0) && fits_fixed_point(matrix, width, height) &&
             fits_fixed_point(matrix, 0, height) && fits_fixed_point(matrix, width, 0)) {
    affine_fixed(in, matrix, out);
  } else {
    affine_float(in, matrix, out);
  }
}

void pil_rotate(const Image& in, double angle, WarpFilter filter, bool expand,
                const std::optional<std::array<double, 2>>& center,
                const std::vector<int>& fill, Image& out) {
  const RotationPlan plan = plan_rotation(in.height, in.width, angle, expand, center);
  if (plan.quarter == 0) {
    out = in;
  } else if (plan.quarter > 0) {
    transpose_rotate(in, plan.quarter, out);
  } else {
    affine_warp(in, plan.height, plan.width, plan.matrix, filter, fill, out);
  }
}

std::pair<int, int> rotated_size(int height, int width, double angle, bool expand,
                                 const std::optional<std::array<double, 2>>& center) {
  const RotationPlan plan = plan_rotation(height, width, angle, expand, center);
  return {plan.height, plan.width};
}

}  // namespace ringloader::transforms
