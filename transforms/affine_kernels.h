// SPDX-License-Identifier: BSD-3-Clause
// Pillow's per-pixel bilinear and bicubic filters of the generic transform
// (Geometry.c, ImagingGenericTransform with affine_transform), shared by
// the portable loops (affine.cc) and the AVX2 ones (affine_avx2.cc). The
// AVX2 kernels do the same double operations in the same order on four
// output pixels at once (no FMA: -ffp-contract=off and no "fma" target),
// so both give the same bytes, which tests/unit/transforms/affine_simd_test.cc
// checks.
#pragma once

#include <cmath>
#include <cstdint>

#include "transforms/affine.h"
#include "transforms/image.h"

namespace ringloader::transforms {

// Pillow's FLOOR macro for the values a filter floors (inside the image,
// minus half a pixel: never far from 0).
inline int pil_floor(double v) {
  return v < 0.0 ? static_cast<int>(std::floor(v)) : static_cast<int>(v);
}

inline int clamp_index(int v, int size) { return v < 0 ? 0 : v < size ? v : size - 1; }

// Output pixel (x, y)'s source point: a * (x + .5, y + .5), evaluated as
// Pillow's affine_transform writes it ((a0 * x + a1 * y) + a2).
struct SourcePoint {
  double xin, yin;
};
inline SourcePoint source_point(const AffineMatrix& a, int x, int y) {
  const double px = x + 0.5, py = y + 0.5;
  return {a[0] * px + a[1] * py + a[2], a[3] * px + a[4] * py + a[5]};
}

// The filters' bounds check, false for NaN too.
inline bool inside(const SourcePoint& p, const Image& in) {
  return p.xin >= 0.0 && p.xin < in.width && p.yin >= 0.0 && p.yin < in.height;
}

// bilinear_filter8/32RGB at one source point inside the image: columns
// clamped; a row below the image repeats the interpolated row above
// (reading the clamped row again computes the same value).
inline void bilinear_pixel(const Image& in, SourcePoint p, uint8_t* target) {
  const double xs = p.xin - 0.5, ys = p.yin - 0.5;
  const int xi = pil_floor(xs), yi = pil_floor(ys);
  const double dx = xs - xi, dy = ys - yi;
  const int c = in.channels;
  const int x0 = clamp_index(xi, in.width) * c, x1 = clamp_index(xi + 1, in.width) * c;
  const uint8_t* row0 = in.row(clamp_index(yi, in.height));
  const uint8_t* row1 = in.row(clamp_index(yi + 1, in.height));
  for (int ch = 0; ch < c; ++ch) {
    const double v1 = row0[x0 + ch] + (row0[x1 + ch] - row0[x0 + ch]) * dx;
    const double v2 = row1[x0 + ch] + (row1[x1 + ch] - row1[x0 + ch]) * dx;
    target[ch] = static_cast<uint8_t>(v1 + (v2 - v1) * dy);
  }
}

// Pillow's BICUBIC macro: a cubic through four samples at offset d.
inline double cubic(double v1, double v2, double v3, double v4, double d) {
  const double p1 = v2;
  const double p2 = -v1 + v3;
  const double p3 = 2 * (v1 - v2) + v3 - v4;
  const double p4 = -v1 + v2 - v3 + v4;
  return p1 + d * (p2 + d * (p3 + d * p4));
}

// The rows bicubic_filter8/32RGB reads for source row `yi`: the first
// clamped, each later one outside the image repeating the one before (its
// cubic is the same value).
inline void bicubic_rows(int yi, int height, int rows[4]) {
  rows[0] = clamp_index(yi - 1, height);
  for (int k = 1; k < 4; ++k) {
    const int r = yi - 1 + k;
    rows[k] = r >= 0 && r < height ? r : rows[k - 1];
  }
}

// bicubic_filter8/32RGB at one source point inside the image: columns
// clamped, the result clipped and truncated.
inline void bicubic_pixel(const Image& in, SourcePoint p, uint8_t* target) {
  const double xs = p.xin - 0.5, ys = p.yin - 0.5;
  const int xi = pil_floor(xs), yi = pil_floor(ys);
  const double dx = xs - xi, dy = ys - yi;
  const int c = in.channels;
  int columns[4], rows[4];
  for (int k = 0; k < 4; ++k) columns[k] = clamp_index(xi - 1 + k, in.width) * c;
  bicubic_rows(yi, in.height, rows);
  for (int ch = 0; ch < c; ++ch) {
    double v[4];
    for (int k = 0; k < 4; ++k) {
      const uint8_t* r = in.row(rows[k]) + ch;
      v[k] = cubic(r[columns[0]], r[columns[1]], r[columns[2]], r[columns[3]], dx);
    }
    const double value = cubic(v[0], v[1], v[2], v[3], dy);
    target[ch] = value <= 0.0 ? 0 : value >= 255.0 ? 255 : static_cast<uint8_t>(value);
  }
}

// The AVX2 loops over every output pixel (pixels whose source lies outside
// keep what `out` holds: the fill). False when not handled (no AVX2, SIMD
// turned off by allow_simd, channels other than 1 and 3, or an image over
// 2 GiB); the caller then runs the portable loop.
bool affine_bilinear_avx2(const Image& in, const AffineMatrix& a, Image& out);
bool affine_bicubic_avx2(const Image& in, const AffineMatrix& a, Image& out);

}  // namespace ringloader::transforms
