// SPDX-License-Identifier: BSD-3-Clause
// The ops themselves: thin classes over geometry.cc and resample.cc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <immintrin.h>

#include "ringloader/errors.h"
#include "transforms/image_ops.h"
#include "transforms/resample_kernels.h"  // have_avx2

namespace ringloader::transforms {
namespace {

// A box of the full image in the coordinates of `in`, which may hold only a
// window of it (region decoding); throws if the window lacks part of it.
Box in_window(const Image& in, Box box) {
  if (in.window.scale_denom != 1) {
    throw Error("ringloader: an exact op got an image decoded at reduced scale");
  }
  box.top -= in.window.top;
  box.left -= in.window.left;
  if (box.top < 0 || box.left < 0 || box.top + box.height > in.height ||
      box.left + box.width > in.width) {
    throw Error("ringloader: a crop box falls outside the decoded region");
  }
  return box;
}

void copy_box(const Image& in, const Box& box, Image& out) {
  resample(ImageView::of(in).crop(box.top, box.left, box.height, box.width),
           box.height, box.width, Interpolation::kNearest, out);
}

class Resize final : public ImageOp {
 public:
  Resize(std::vector<int> size, Interpolation interpolation, int max_size)
      : size_(std::move(size)), interpolation_(interpolation), max_size_(max_size) {}
  void apply(Image& in, Image& out, SampleRng&) const override {
    auto [height, width] = resized_size(in.height, in.width, size_, max_size_);
    resample(ImageView::of(in), height, width, interpolation_, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    return resized_size(height, width, size_, max_size_);
  }

 private:
  std::vector<int> size_;
  Interpolation interpolation_;
  int max_size_;
};

class CenterCrop final : public ImageOp {
 public:
  CenterCrop(int height, int width) : height_(height), width_(width) {}
  Box centre_box(int height, int width) const {
    return {static_cast<int>(std::nearbyint((height - height_) / 2.0)),
            static_cast<int>(std::nearbyint((width - width_) / 2.0)), height_, width_};
  }
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    RegionPlan plan;
    if (plan_region(in.full_height(), in.full_width(), rng, plan)) {
      copy_box(in, in_window(in, plan.box), out);
      std::swap(in, out);
      return;
    }
    Image* source = &in;
    if (height_ > in.height || width_ > in.width) {
      // torchvision pads with zeros first, split left/right like this.
      Padding padding;
      int dw = std::max(0, width_ - in.width), dh = std::max(0, height_ - in.height);
      padding.ltrb = {dw / 2, dh / 2, (dw + 1) / 2, (dh + 1) / 2};
      pad(in, padding, out);
      std::swap(in, out);
      source = &in;
    }
    copy_box(*source, centre_box(source->height, source->width), out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int, int) const override { return {height_, width_}; }
  // Only when no padding is needed: a padded crop reads the whole image.
  bool plan_region(int height, int width, SampleRng&, RegionPlan& plan) const override {
    if (height_ > height || width_ > width) return false;
    plan.box = centre_box(height, width);
    return true;
  }

 private:
  int height_, width_;
};

class RandomCrop final : public ImageOp {
 public:
  RandomCrop(int height, int width, Padding padding, bool pad_if_needed)
      : height_(height), width_(width), padding_(std::move(padding)),
        pad_if_needed_(pad_if_needed) {}
  // Draws: top, then left (none when the image already has the crop size).
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    if (padding_.any()) {
      pad(in, padding_, out);
      std::swap(in, out);
    }
    if (pad_if_needed_ && (in.width < width_ || in.height < height_)) {
      Padding extra = padding_;
      extra.ltrb = {std::max(0, width_ - in.width), std::max(0, height_ - in.height),
                    std::max(0, width_ - in.width), std::max(0, height_ - in.height)};
      pad(in, extra, out);
      std::swap(in, out);
    }
    if (in.height < height_ || in.width < width_) {
      throw Error("RandomCrop: required crop size " + std::to_string(height_) + "x" +
                  std::to_string(width_) + " is larger than the (padded) image " +
                  std::to_string(in.height) + "x" + std::to_string(in.width));
    }
    Box box{0, 0, height_, width_};
    if (in.height != height_ || in.width != width_) {
      box.top = static_cast<int>(rng.integer(0, in.height - height_));
      box.left = static_cast<int>(rng.integer(0, in.width - width_));
    }
    copy_box(in, box, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int, int) const override { return {height_, width_}; }

 private:
  int height_, width_;
  Padding padding_;
  bool pad_if_needed_;
};

class RandomResizedCrop final : public ImageOp {
 public:
  RandomResizedCrop(int height, int width, std::array<double, 2> scale,
                    std::array<double, 2> ratio, std::optional<Interpolation> interpolation)
      : height_(height), width_(width), scale_(scale), ratio_(ratio),
        interpolation_(interpolation) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    Box box = in_window(in, random_resized_crop_box(in.full_height(), in.full_width(),
                                                    scale_, ratio_, rng));
    // timm's random.choice((BILINEAR, BICUBIC)), drawn after the box.
    const Interpolation mode = interpolation_ ? *interpolation_
                               : rng.integer(0, 1) == 0 ? Interpolation::kBilinear
                                                        : Interpolation::kBicubic;
    // Crop, then resize the crop (a view: no copy), as F.resized_crop does.
    resample(ImageView::of(in).crop(box.top, box.left, box.height, box.width),
             height_, width_, mode, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int, int) const override { return {height_, width_}; }
  bool plan_region(int height, int width, SampleRng& rng, RegionPlan& plan) const override {
    plan.box = random_resized_crop_box(height, width, scale_, ratio_, rng);
    return true;
  }

 private:
  int height_, width_;
  std::array<double, 2> scale_, ratio_;
  std::optional<Interpolation> interpolation_;
};

template <int kChannels>
void mirror_row(const uint8_t* source, int width, uint8_t* target) {
  const uint8_t* pixel = source + (width - 1) * kChannels;
  for (int x = 0; x < width; ++x, pixel -= kChannels) {
    for (int ch = 0; ch < kChannels; ++ch) target[x * kChannels + ch] = pixel[ch];
  }
}

// RGB rows mirrored five pixels per step: 16 bytes loaded from one byte
// before the five source pixels (so the load stays in the row), the pixels
// reversed by one pshufb, 16 bytes stored (the 16th is the next step's
// first, rewritten). Returns the pixels done; the caller does the rest.
__attribute__((target("avx2"))) int mirror_rgb_row_avx2(const uint8_t* source, int width,
                                                        uint8_t* target) {
  const __m128i reverse =
      _mm_setr_epi8(13, 14, 15, 10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3, 0);
  int x = 0;
  for (; x + 6 <= width; x += 5) {  // output pixels x..x+4: source width-5-x..width-1-x
    const __m128i v =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(source + 3 * (width - 5 - x) - 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(target + 3 * x), _mm_shuffle_epi8(v, reverse));
  }
  return x;
}

void mirror_rgb_row(const uint8_t* source, int width, uint8_t* target) {
  const int done = have_avx2() ? mirror_rgb_row_avx2(source, width, target) : 0;
  const uint8_t* pixel = source + (width - 1 - done) * 3;
  for (int x = done; x < width; ++x, pixel -= 3) {
    target[3 * x] = pixel[0], target[3 * x + 1] = pixel[1], target[3 * x + 2] = pixel[2];
  }
}

class Flip final : public ImageOp {
 public:
  Flip(bool horizontal, double p) : horizontal_(horizontal), p_(p) {}
  // Draws: one uniform, flips when it is below p (torch.rand(1) < p).
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    if (!rng.bernoulli(p_)) return;  // in stays the current image
    out.reshape(in.height, in.width, in.channels);
    const int c = in.channels;
    for (int y = 0; y < in.height; ++y) {
      const uint8_t* source = in.row(horizontal_ ? y : in.height - 1 - y);
      uint8_t* target = out.row(y);
      if (!horizontal_) {
        std::memcpy(target, source, in.row_bytes());
        continue;
      }
      switch (c) {  // a constant channel count lets the compiler unroll
        case 1: mirror_row<1>(source, in.width, target); break;
        case 3: mirror_rgb_row(source, in.width, target); break;
        default:
          for (int x = 0; x < in.width; ++x) {
            std::memcpy(target + x * c, source + (in.width - 1 - x) * c, c);
          }
      }
    }
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    return {height, width};
  }

 private:
  bool horizontal_;
  double p_;
};

class Pad final : public ImageOp {
 public:
  explicit Pad(Padding padding) : padding_(std::move(padding)) {}
  void apply(Image& in, Image& out, SampleRng&) const override {
    pad(in, padding_, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    if (height <= 0 || width <= 0) return {0, 0};
    return {height + padding_.ltrb[1] + padding_.ltrb[3],
            width + padding_.ltrb[0] + padding_.ltrb[2]};
  }

 private:
  Padding padding_;
};

}  // namespace

std::unique_ptr<ImageOp> make_resize(std::vector<int> size, Interpolation interpolation,
                                     int max_size) {
  return std::make_unique<Resize>(std::move(size), interpolation, max_size);
}
std::unique_ptr<ImageOp> make_center_crop(int height, int width) {
  return std::make_unique<CenterCrop>(height, width);
}
std::unique_ptr<ImageOp> make_random_crop(int height, int width, Padding padding,
                                          bool pad_if_needed) {
  return std::make_unique<RandomCrop>(height, width, std::move(padding), pad_if_needed);
}
std::unique_ptr<ImageOp> make_random_resized_crop(int height, int width,
                                                  std::array<double, 2> scale,
                                                  std::array<double, 2> ratio,
                                                  std::optional<Interpolation> interpolation) {
  return std::make_unique<RandomResizedCrop>(height, width, scale, ratio, interpolation);
}
std::unique_ptr<ImageOp> make_flip(bool horizontal, double p) {
  return std::make_unique<Flip>(horizontal, p);
}
std::unique_ptr<ImageOp> make_pad(Padding padding) {
  return std::make_unique<Pad>(std::move(padding));
}

}  // namespace ringloader::transforms
