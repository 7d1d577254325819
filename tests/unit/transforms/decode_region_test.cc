// SPDX-License-Identifier: BSD-3-Clause
// Region decoding (only the rows and columns around the first op's crop
// box) gives exactly the pixels of a full decode inside the box, for every
// chroma subsampling, progressive files, odd sizes and boxes at every edge;
// and whole pipelines give the same bytes either way.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <random>
#include <vector>

#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "transforms/compiled_pipeline.h"
#include "transforms/decode/decode.h"

namespace ringloader::transforms {
namespace {

// A photo-like test card: gradients, edges and noise in every channel.
std::vector<uint8_t> test_card(int height, int width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> rgb(static_cast<size_t>(height) * width * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      const int noise = static_cast<int>(rng() % 48);
      p[0] = static_cast<uint8_t>((x * 255 / width + noise) % 256);
      p[1] = static_cast<uint8_t>(((x / 7 + y / 5) % 2 ? 200 : 40) + noise / 2);
      p[2] = static_cast<uint8_t>((y * 255 / height + (x ^ y) % 64) % 256);
    }
  }
  return rgb;
}

std::vector<uint8_t> encode(int height, int width, int subsampling, bool progressive,
                            uint32_t seed) {
  const auto rgb = test_card(height, width, seed);
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int flags = TJFLAG_ACCURATEDCT | (progressive ? TJFLAG_PROGRESSIVE : 0);
  EXPECT_EQ(tjCompress2(handle, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size,
                        subsampling, 90, flags),
            0)
      << tjGetErrorStr2(handle);
  std::vector<uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(handle);
  return out;
}

struct Encoding {
  int subsampling;
  bool progressive;
};

const std::vector<Encoding>& encodings() {
  static const std::vector<Encoding> all = {
      {TJSAMP_420, false}, {TJSAMP_422, false}, {TJSAMP_444, false}, {TJSAMP_440, false},
      {TJSAMP_411, false}, {TJSAMP_GRAY, false}, {TJSAMP_420, true}, {TJSAMP_444, true}};
  return all;
}

// Boxes in the middle, touching each edge and corner, thin and tiny.
std::vector<Box> boxes(int height, int width) {
  std::vector<Box> out = {{height / 3, width / 4, height / 3, width / 2},
                          {0, 0, height / 2, width / 2},
                          {height / 2, width / 2, height - height / 2, width - width / 2},
                          {0, width - 17, height, 17},
                          {height - 9, 0, 9, width},
                          {17, 33, 1, 1},
                          {height / 2 - 20, width / 3 - 5, 37, 29}};
  std::mt19937 rng(height * 31 + width);
  for (int i = 0; i < 12; ++i) {
    const int h = 1 + static_cast<int>(rng() % height);
    const int w = 1 + static_cast<int>(rng() % width);
    out.push_back({static_cast<int>(rng() % (height - h + 1)),
                   static_cast<int>(rng() % (width - w + 1)), h, w});
  }
  return out;
}

TEST(DecodeRegion, BoxPixelsEqualTheFullDecode) {
  int partial_decodes = 0;
  for (const auto [height, width] : {std::pair{375, 500}, std::pair{333, 257}, {64, 48}}) {
    for (const Encoding& encoding : encodings()) {
      const auto jpeg = encode(height, width, encoding.subsampling, encoding.progressive,
                               static_cast<uint32_t>(height + encoding.subsampling));
      for (ColorMode mode : {ColorMode::kRGB, ColorMode::kGray}) {
        Image full;
        decode_image(jpeg.data(), jpeg.size(), mode, "full", full);
        for (const Box& box : boxes(height, width)) {
          SCOPED_TRACE(std::to_string(height) + "x" + std::to_string(width) + " sampling " +
                       std::to_string(encoding.subsampling) +
                       (encoding.progressive ? " progressive" : "") + " box " +
                       std::to_string(box.top) + "," + std::to_string(box.left) + " " +
                       std::to_string(box.height) + "x" + std::to_string(box.width));
          Image part;
          decode_image(jpeg.data(), jpeg.size(), mode, "part", part, {},
                       // C++17 lambdas cannot capture structured bindings.
                       [&, full_h = height, full_w = width](int h, int w, RegionPlan& plan) {
                         EXPECT_EQ(h, full_h);
                         EXPECT_EQ(w, full_w);
                         plan.box = box;
                         return true;
                       });
          partial_decodes += part.is_partial();
          ASSERT_EQ(part.full_height(), height);
          ASSERT_EQ(part.full_width(), width);
          const int top = box.top - part.window.top, left = box.left - part.window.left;
          ASSERT_GE(top, 0);
          ASSERT_GE(left, 0);
          ASSERT_LE(top + box.height, part.height);
          ASSERT_LE(left + box.width, part.width);
          long differing = 0;
          const int c = full.channels;
          for (int y = 0; y < box.height; ++y) {
            const uint8_t* a = full.row(box.top + y) + box.left * c;
            const uint8_t* b = part.row(top + y) + left * c;
            for (int i = 0; i < box.width * c; ++i) differing += a[i] != b[i];
          }
          EXPECT_EQ(differing, 0);
        }
      }
    }
  }
  EXPECT_GT(partial_decodes, 200);  // the region path really ran
}

TEST(DecodeRegion, PipelinesGiveTheSameBytesAsAFullDecode) {
  const std::vector<Pipeline> pipelines = {
      {RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
       Normalize({0.45}, {0.225})},
      {RandomResizedCrop(std::vector<int>{96, 64}, {0.01, 0.3}, {0.5, 2.0}, Interpolation::kBicubic)},
      {CenterCrop(std::vector<int>{100, 171}), PILToTensor()},
      {CenterCrop(600)},  // larger than the image: pads, decodes in full
  };
  const auto jpeg = encode(375, 500, TJSAMP_420, false, 7);
  for (size_t p = 0; p < pipelines.size(); ++p) {
    for (ColorMode mode : {ColorMode::kRGB, ColorMode::kGray}) {
      CompiledPipeline compiled(pipelines[p], mode);
      for (uint64_t index = 0; index < 40; ++index) {
        SCOPED_TRACE("pipeline " + std::to_string(p) + " sample " + std::to_string(index));
        const auto region = apply_pipeline(pipelines[p], jpeg, mode, 3, 1, index);
        Image image, scratch;
        decode_image(jpeg.data(), jpeg.size(), mode, "full", image);
        std::vector<uint8_t> full(compiled.output_shape().bytes());
        SampleRng rng(3, 1, index);
        compiled.run(image, scratch, rng, full.data());
        ASSERT_EQ(region.bytes, full);
      }
    }
  }
}

}  // namespace
}  // namespace ringloader::transforms
