#include "transforms/tensor_stage.h"

#include <cstring>

namespace ringloader::transforms {

TensorWriter::TensorWriter(DType dtype, Layout layout, int channels,
                           const std::vector<double>& mean,
                           const std::vector<double>& std)
    : dtype_(dtype), layout_(layout) {
  if (dtype != DType::kFloat32) return;
  lookup_.resize(channels);
  for (int c = 0; c < channels; ++c) {
    const float m = mean.empty() ? 0.0f : static_cast<float>(mean[c]);
    const float s = std.empty() ? 1.0f : static_cast<float>(std[c]);
    for (int v = 0; v < 256; ++v) {
      float x = static_cast<float>(v) / 255.0f;
      lookup_[c][v] = mean.empty() ? x : (x - m) / s;
    }
  }
}

void TensorWriter::write(const Image& image, void* destination) const {
  const int channels = image.channels;
  const size_t plane = static_cast<size_t>(image.height) * image.width;
  const uint8_t* pixels = image.pixels.data();
  if (dtype_ == DType::kUInt8 && layout_ == Layout::kHWC) {
    std::memcpy(destination, pixels, plane * channels);
    return;
  }
  if (dtype_ == DType::kUInt8) {
    auto* out = static_cast<uint8_t*>(destination);
    for (int c = 0; c < channels; ++c) {
      for (size_t i = 0; i < plane; ++i) out[c * plane + i] = pixels[i * channels + c];
    }
    return;
  }
  auto* out = static_cast<float*>(destination);
  for (int c = 0; c < channels; ++c) {
    const float* table = lookup_[c].data();
    float* target = out + c * plane;
    const uint8_t* source = pixels + c;
    for (size_t i = 0; i < plane; ++i) target[i] = table[source[i * channels]];
  }
}

}  // namespace ringloader::transforms
