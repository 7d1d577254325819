// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/fast_ops.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "ringloader/errors.h"
#include "transforms/image_ops.h"

#ifdef RINGLOADER_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace ringloader::transforms {

#ifndef RINGLOADER_HAVE_OPENCV

bool fast_mode_available() { return false; }
std::unique_ptr<ImageOp> make_fast_image_op(OpParams&) { return nullptr; }

#else

bool fast_mode_available() { return true; }

namespace {

cv::Mat as_mat(Image& image) {
  return cv::Mat(image.height, image.width, CV_8UC(image.channels), image.pixels.data());
}

// Shrinking by 2x or more: INTER_AREA (averages every pixel, no aliasing).
// Less than 2x (fast RandomResizedCrop decodes at a reduced DCT scale to get
// there): INTER_LINEAR, several times faster than INTER_AREA at
// fractional factors. Enlarging: INTER_LINEAR, or INTER_CUBIC for "bicubic".
int cv_interpolation(int in_height, int in_width, int out_height, int out_width,
                     bool bicubic) {
  if (in_height >= 2 * out_height || in_width >= 2 * out_width) return cv::INTER_AREA;
  if (in_height >= out_height && in_width >= out_width) return cv::INTER_LINEAR;
  return bicubic ? cv::INTER_CUBIC : cv::INTER_LINEAR;
}

// `rect` of `in` resized to out_height x out_width into `out`.
void resize_rect(Image& in, const cv::Rect& rect, int out_height, int out_width,
                 bool bicubic, Image& out) {
  out.reshape(out_height, out_width, in.channels);
  cv::Mat target = as_mat(out);
  cv::resize(as_mat(in)(rect), target, target.size(), 0, 0,
             cv_interpolation(rect.height, rect.width, out_height, out_width, bicubic));
}

// A box of the full image in the pixels of `in`, which may be a window of
// it decoded at 1/scale_denom: rounded to whole decoded pixels.
cv::Rect decoded_rect(const Image& in, const Box& box) {
  const double scale = 1.0 / in.window.scale_denom;
  auto edge = [&](int full, int offset, int limit) {
    return std::clamp(static_cast<int>(std::lround(full * scale)) - offset, 0, limit);
  };
  const int top = edge(box.top, in.window.top, in.height - 1);
  const int left = edge(box.left, in.window.left, in.width - 1);
  const int bottom = std::max(top + 1, edge(box.top + box.height, in.window.top, in.height));
  const int right = std::max(left + 1, edge(box.left + box.width, in.window.left, in.width));
  return {left, top, right - left, bottom - top};
}

class FastRandomResizedCrop final : public ImageOp {
 public:
  FastRandomResizedCrop(int height, int width, std::array<double, 2> scale,
                        std::array<double, 2> ratio, bool bicubic, bool random)
      : height_(height), width_(width), scale_(scale), ratio_(ratio), bicubic_(bicubic),
        random_(random) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    const Box box = random_resized_crop_box(in.full_height(), in.full_width(), scale_,
                                            ratio_, rng);
    // The exact op's draw for interpolation='random', so the streams agree.
    const bool bicubic = random_ ? rng.integer(0, 1) == 1 : bicubic_;
    resize_rect(in, decoded_rect(in, box), height_, width_, bicubic, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int, int) const override { return {height_, width_}; }
  // The box may be decoded at a reduced DCT scale while it keeps the output size.
  bool plan_region(int height, int width, SampleRng& rng, RegionPlan& plan) const override {
    plan.box = random_resized_crop_box(height, width, scale_, ratio_, rng);
    plan.min_height = height_;
    plan.min_width = width_;
    plan.fast = true;
    return true;
  }

 private:
  int height_, width_;
  std::array<double, 2> scale_, ratio_;
  bool bicubic_, random_;
};

class FastResize final : public ImageOp {
 public:
  FastResize(std::vector<int> size, int max_size, bool nearest, bool bicubic)
      : size_(std::move(size)), max_size_(max_size), nearest_(nearest), bicubic_(bicubic) {}
  void apply(Image& in, Image& out, SampleRng&) const override {
    auto [height, width] = resized_size(in.height, in.width, size_, max_size_);
    if (nearest_) {  // PIL's nearest is cheap and exact already
      resample(ImageView::of(in), height, width, Interpolation::kNearest, out);
    } else {
      resize_rect(in, cv::Rect(0, 0, in.width, in.height), height, width, bicubic_, out);
    }
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    return resized_size(height, width, size_, max_size_);
  }

 private:
  std::vector<int> size_;
  int max_size_;
  bool nearest_, bicubic_;
};

Interpolation interpolation(OpParams& p) {
  return interpolation_from_name(p.choice("interpolation"));
}

std::array<double, 2> ordered_pair(OpParams& p, const std::string& key) {
  std::vector<double> v = p.numbers(key, {2});
  if (v[0] > v[1]) p.fail(key, "must be (min, max)");
  if (!(v[0] > 0)) p.fail(key, "must be positive");
  return {v[0], v[1]};
}

std::unique_ptr<ImageOp> fast_random_resized_crop(OpParams& p) {
  std::vector<int> size = p.ints("size", {1, 2}, true);
  auto scale = ordered_pair(p, "scale");
  auto ratio = ordered_pair(p, "ratio");
  p.boolean("antialias");
  const std::string mode = p.choice("interpolation");
  return std::make_unique<FastRandomResizedCrop>(
      size[0], size.size() == 2 ? size[1] : size[0], scale, ratio, mode == "bicubic",
      mode == "random");
}

std::unique_ptr<ImageOp> fast_resize(OpParams& p) {
  std::vector<int> size = p.ints("size", {1, 2}, true);
  const int max_size = p.present("max_size") ? static_cast<int>(p.number("max_size")) : 0;
  if (max_size && size.size() == 2) p.fail("max_size", "needs a single size");
  if (max_size && max_size <= size[0]) p.fail("max_size", "must exceed size");
  p.boolean("antialias");
  const Interpolation mode = interpolation(p);
  return std::make_unique<FastResize>(size, max_size, mode == Interpolation::kNearest,
                                      mode == Interpolation::kBicubic);
}

}  // namespace

std::unique_ptr<ImageOp> make_fast_image_op(OpParams& params) {
  // OpenCV would start its own thread pool per process; the loader's
  // workers are the parallelism.
  static std::once_flag single_threaded;
  std::call_once(single_threaded, [] { cv::setNumThreads(1); });
  if (params.op().name == "RandomResizedCrop") return fast_random_resized_crop(params);
  if (params.op().name == "Resize") return fast_resize(params);
  return nullptr;
}

#endif

}  // namespace ringloader::transforms
