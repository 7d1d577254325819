// SPDX-License-Identifier: BSD-3-Clause
// Two custom ops in one shared library, built against the public header
// only (nothing of ringloader is linked in): the example for
// include/ringloader/custom_op.h.
//
//   {"op": "Custom", "library": "/abs/libringloader_sample_ops.so",
//    "name": "RandomInvert", "p": 0.5}
//       torchvision's RandomInvert: 255 - value, with probability p.
//   {"op": "Custom", "library": "...", "name": "ShaveBorder", "pixels": 2}
//       cuts `pixels` rows and columns off every side (shows output_size).
#include <ringloader/custom_op.h>

#include <cstring>
#include <stdexcept>

namespace {

class RandomInvert final : public ringloader::CustomOp {
 public:
  explicit RandomInvert(const nlohmann::json& params) : p_(params.value("p", 0.5)) {
    for (const auto& item : params.items()) {
      if (item.key() != "p") throw std::invalid_argument("unknown parameter '" + item.key() + "'");
    }
    if (!(p_ >= 0.0 && p_ <= 1.0)) throw std::invalid_argument("'p' must be in [0, 1]");
  }
  void apply(const ringloader::CustomImage& in, ringloader::CustomImage& out,
             ringloader::CustomRandom& random) const override {
    const bool invert = random.uniform() < p_;  // one draw per sample
    for (size_t i = 0; i < in.bytes(); ++i) {
      out.pixels[i] = invert ? static_cast<uint8_t>(255 - in.pixels[i]) : in.pixels[i];
    }
  }

 private:
  double p_;
};

class ShaveBorder final : public ringloader::CustomOp {
 public:
  explicit ShaveBorder(const nlohmann::json& params) {
    if (!params.contains("pixels") || !params["pixels"].is_number_integer()) {
      throw std::invalid_argument("'pixels' (an integer) is required");
    }
    pixels_ = params["pixels"].get<int>();
    if (pixels_ < 0) throw std::invalid_argument("'pixels' must be >= 0");
  }
  std::pair<int, int> output_size(int height, int width) const override {
    if (height <= 0 || width <= 0) return {0, 0};  // varies with the input
    return {height - 2 * pixels_, width - 2 * pixels_};
  }
  void apply(const ringloader::CustomImage& in, ringloader::CustomImage& out,
             ringloader::CustomRandom&) const override {
    if (out.height <= 0 || out.width <= 0) throw std::runtime_error("image too small to shave");
    for (int y = 0; y < out.height; ++y) {
      std::memcpy(out.pixel(y, 0), in.pixel(y + pixels_, pixels_),
                  static_cast<size_t>(out.width) * out.channels);
    }
  }

 private:
  int pixels_ = 0;
};

}  // namespace

RINGLOADER_CUSTOM_OPS(registry) {
  registry.add<RandomInvert>("RandomInvert");
  registry.add<ShaveBorder>("ShaveBorder");
}
