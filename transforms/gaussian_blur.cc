// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/gaussian_blur.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ringloader/errors.h"

namespace ringloader::transforms {
namespace {

// torch's "reflect" padding: the edge pixel is not repeated (-1 -> 1).
int reflect(int i, int n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

void check_fits(int kernel, int side, const char* axis) {
  if (kernel / 2 >= side) {
    throw Error("GaussianBlur: kernel size " + std::to_string(kernel) + " needs an image " +
                axis + " larger than " + std::to_string(kernel / 2) + ", got " +
                std::to_string(side) + " (reflect padding, as torch requires)");
  }
}

}  // namespace

std::vector<float> gaussian_kernel1d(int size, float sigma) {
  // linspace(-half, half, size) holds exact integers for odd sizes.
  const int half = size / 2;
  std::vector<float> pdf(size);
  float sum = 0.0f;
  for (int i = 0; i < size; ++i) {
    const float x = static_cast<float>(i - half) / sigma;
    pdf[i] = std::exp(-0.5f * (x * x));
    sum += pdf[i];
  }
  for (float& v : pdf) v /= sum;
  return pdf;
}

void gaussian_blur(const Image& in, int kernel_x, int kernel_y, float sigma_x,
                   float sigma_y, Image& out) {
  check_fits(kernel_x, in.width, "width");
  check_fits(kernel_y, in.height, "height");
  const std::vector<float> wx = gaussian_kernel1d(kernel_x, sigma_x);
  const std::vector<float> wy = gaussian_kernel1d(kernel_y, sigma_y);
  const int h = in.height, w = in.width, c = in.channels;
  const int hx = kernel_x / 2, hy = kernel_y / 2;
  // Horizontal pass into doubles (exact enough to leave only torch's own
  // float32 rounding between us), then the vertical pass and rounding.
  std::vector<double> rows(static_cast<size_t>(h) * w * c);
  std::vector<int> columns(static_cast<size_t>(w) + 2 * hx);
  for (int x = -hx; x < w + hx; ++x) columns[x + hx] = reflect(x, w);
  for (int y = 0; y < h; ++y) {
    const uint8_t* source = in.row(y);
    double* target = rows.data() + static_cast<size_t>(y) * w * c;
    for (int x = 0; x < w; ++x) {
      for (int ch = 0; ch < c; ++ch) {
        double acc = 0.0;
        for (int k = 0; k < kernel_x; ++k) {
          acc += static_cast<double>(wx[k]) * source[columns[x + k] * c + ch];
        }
        target[x * c + ch] = acc;
      }
    }
  }
  out.reshape(h, w, c);
  const size_t row_values = static_cast<size_t>(w) * c;
  std::vector<double> acc(row_values);
  for (int y = 0; y < h; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int k = 0; k < kernel_y; ++k) {
      const double weight = wy[k];
      const double* source = rows.data() + reflect(y + k - hy, h) * row_values;
      for (size_t i = 0; i < row_values; ++i) acc[i] += weight * source[i];
    }
    uint8_t* target = out.row(y);
    for (size_t i = 0; i < row_values; ++i) {
      const double v = std::nearbyint(acc[i]);  // torch.round: half to even
      target[i] = v >= 255.0 ? 255 : v > 0.0 ? static_cast<uint8_t>(v) : 0;
    }
  }
}

namespace {

class GaussianBlur final : public ImageOp {
 public:
  GaussianBlur(int kernel_x, int kernel_y, std::array<double, 2> sigma)
      : kernel_x_(kernel_x), kernel_y_(kernel_y), sigma_(sigma) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    const float sigma = static_cast<float>(rng.uniform(sigma_[0], sigma_[1]));
    gaussian_blur(in, kernel_x_, kernel_y_, sigma, sigma, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    return {height, width};
  }

 private:
  int kernel_x_, kernel_y_;
  std::array<double, 2> sigma_;
};

}  // namespace

std::unique_ptr<ImageOp> make_gaussian_blur(int kernel_x, int kernel_y,
                                            std::array<double, 2> sigma) {
  return std::make_unique<GaussianBlur>(kernel_x, kernel_y, sigma);
}

}  // namespace ringloader::transforms
