// SPDX-License-Identifier: BSD-3-Clause
// Affine warps as torchvision 0.14 runs them on PIL images: F.rotate calls
// Image.rotate, F.affine calls Image.transform(AFFINE) with the matrix of
// F._get_inverse_affine_matrix. Both end in Pillow 9.4's Geometry.c, whose
// sampling is reproduced here: nearest through ImagingScaleAffine (no
// rotation or shear), 16.16 fixed point (the usual case) or accumulated
// doubles; bilinear and bicubic through the generic per-pixel transform,
// truncating.
// Pixels that map outside the source keep the fill colour.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "transforms/image.h"

namespace ringloader::transforms {

// Output pixel (x, y) samples the source at a * (x + .5, y + .5, 1), PIL's
// "data" for Transform.AFFINE: {a0, a1, a2, a3, a4, a5}.
using AffineMatrix = std::array<double, 6>;

enum class WarpFilter { kNearest, kBilinear, kBicubic };

// F._get_inverse_affine_matrix(center, angle, translate, scale, shear) in
// Python's double arithmetic (angles in degrees).
AffineMatrix inverse_affine_matrix(std::array<double, 2> center, double angle,
                                   std::array<double, 2> translate, double scale,
                                   std::array<double, 2> shear);

// Image.transform((width, height), AFFINE, matrix, filter, fillcolor=fill).
// `fill` has one value per channel (one value is repeated).
void affine_warp(const Image& in, int height, int width, const AffineMatrix& matrix,
                 WarpFilter filter, const std::vector<int>& fill, Image& out);

// Image.rotate(angle, filter, expand, center, fillcolor=fill), including its
// shortcuts (0, 180, and 90/270 when square or expanding, without a centre:
// exact transposes) and its 15-decimal rounding of the rotation matrix.
void pil_rotate(const Image& in, double angle, WarpFilter filter, bool expand,
                const std::optional<std::array<double, 2>>& center,
                const std::vector<int>& fill, Image& out);
// The (height, width) pil_rotate gives for a `height` x `width` image.
std::pair<int, int> rotated_size(int height, int width, double angle, bool expand,
                                 const std::optional<std::array<double, 2>>& center);

}  // namespace ringloader::transforms
