// SPDX-License-Identifier: BSD-3-Clause
// RandomErasing (torchvision 0.14), part of the tensor stage: it runs on the
// sample's CHW tensor in the ring slot after ToTensor / PILToTensor wrote it,
// like torchvision's RandomErasing on the tensor F.to_tensor returned.
#pragma once

#include <array>
#include <vector>

#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "transforms/op_params.h"

namespace ringloader::transforms {

struct ErasingParams {
  double p = 0.5;
  std::array<double, 2> scale{0.02, 0.33};
  std::array<double, 2> ratio{0.3, 3.3};
  bool random_value = false;        // value='random': standard normal noise
  bool per_channel = false;         // with random_value: one normal per channel (timm's 'rand')
  std::vector<double> value{0.0};  // one value, or one per channel
};

// The box get_params chose; `erase` is false when the p-draw said no or no
// try fitted (torchvision then returns the image unchanged).
struct ErasingBox {
  bool erase = false;
  int top = 0, left = 0, height = 0, width = 0;
};

// forward + get_params from the sample's stream. Draws, in order: one
// uniform (erase when < p); per try (at most 10) a float32 uniform in
// `scale` and one in log(ratio) (float32 logs and exp, like torch); for the
// accepted box, when value is 'random', one 64-bit key, and with it
// channels * height * width standard normals (normal_noise.h) into `noise`,
// CHW order ('random_per_channel': `channels` normals; the key is drawn
// whether `noise` is given or not); then top, then left.
ErasingBox draw_erasing_box(const ErasingParams& params, int channels, int height,
                            int width, SampleRng& rng, std::vector<float>* noise);

// Reads RandomErasing's parameters as its constructor checks them;
// `channels` is the tensor's channel count (for per-channel values).
ErasingParams erasing_params(OpParams& params, int channels);

class RandomErasing {
 public:
  // `mean` / `std` are those of a Normalize that runs after this op (empty
  // if none): the slot already holds normalised values, so erased values are
  // normalised the way Normalize would have, (v - mean) / std in float32.
  RandomErasing(ErasingParams params, const SampleShape& shape, std::vector<double> mean,
                std::vector<double> std);
  // `tensor` is one sample, `shape` (CHW, uint8 or float32).
  void apply(void* tensor, SampleRng& rng) const;

 private:
  void normalise(float* values, size_t count, int channel) const;
  ErasingParams params_;
  SampleShape shape_;
  std::vector<double> mean_, std_;
};

}  // namespace ringloader::transforms
