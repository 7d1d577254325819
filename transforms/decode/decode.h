// SPDX-License-Identifier: BSD-3-Clause
// Decoding encoded image bytes into an 8-bit Image converted like PIL's
// Image.convert("RGB") or convert("L"). The format is sniffed from magic
// bytes, never from the file extension.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "ringloader/transforms.h"
#include "transforms/image.h"

namespace ringloader::transforms {

struct DecodeLimits {
  // Images with more pixels than this are refused before any allocation
  // (decompression bombs). Pillow's default warning limit is ~89M pixels.
  int64_t max_pixels = 178956970;
};

// The part of an image a pipeline will read, decided from the image's size
// alone before any pixel is decoded: the box of a RandomResizedCrop or
// CenterCrop that comes first.
struct RegionPlan {
  Box box;  // in full-image pixels
  // Fast mode: the box may be decoded at a reduced DCT scale (1/2, 1/4,
  // 1/8) as long as it stays at least this large. 0: full resolution.
  int min_height = 0;
  int min_width = 0;
  // Fast mode: libjpeg's fast integer IDCT and plain (not fancy) chroma
  // upsampling, which differ from PIL's by a level or two.
  bool fast = false;
};
// Returns false when the whole image is needed. Called at most once per
// decode, with the image's full size.
using RegionPlanner = std::function<bool(int height, int width, RegionPlan& plan)>;

// Throws DecodeError whose message names `source` (file name, member name)
// and the reason: empty, truncated, corrupt header, unsupported format, too
// many pixels.
// With a `region` planner, a JPEG may be decoded only around the planned box
// (out.window says where the part lies); the pixels inside the box equal a
// full decode's. Formats and cases that cannot do that decode in full.
void decode_image(const uint8_t* data, size_t size, ColorMode mode,
                  const std::string& source, Image& out,
                  const DecodeLimits& limits = {},
                  const RegionPlanner& region = {});

}  // namespace ringloader::transforms
