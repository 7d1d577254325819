// SPDX-License-Identifier: BSD-3-Clause
// Resizing that reproduces Pillow's Image.resize pixel for pixel: the
// separable convolution of libImaging/Resample.c (support widened by the
// downscale factor, i.e. antialiased; 22-bit fixed-point coefficients; the
// horizontal pass first, over only the rows the vertical pass reads), and
// Pillow's nearest-neighbour affine path. OpenCV's resizers differ from PIL
// by several levels, which costs accuracy when a model trained with
// torchvision is evaluated through another loader.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringloader/transforms.h"
#include "transforms/image.h"

namespace ringloader::transforms {

using ringloader::Interpolation;  // the public enum (transforms.h)

// A rectangle of an image, without copying it (a crop is a view).
struct ImageView {
  const uint8_t* origin = nullptr;  // top-left pixel of the view
  size_t row_stride = 0;            // bytes between rows of the full image
  int height = 0;
  int width = 0;
  int channels = 0;

  static ImageView of(const Image& image) {
    return {image.pixels.data(), image.row_bytes(), image.height, image.width,
            image.channels};
  }
  ImageView crop(int top, int left, int crop_height, int crop_width) const {
    return {origin + top * row_stride + static_cast<size_t>(left) * channels,
            row_stride, crop_height, crop_width, channels};
  }
};

// Resizes `source` to out_height x out_width into `out` (reshaped), exactly
// like PIL's source.resize((out_width, out_height), interpolation).
void resample(const ImageView& source, int out_height, int out_width,
              Interpolation interpolation, Image& out);

}  // namespace ringloader::transforms
