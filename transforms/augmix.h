// SPDX-License-Identifier: BSD-3-Clause
// AugMix's forward pass for drawn values (auto_augment.h's draw_augment):
// each chain's ops on uint8 tensors (tensor_augment_ops.h), mixed in
// float32 as torchvision mixes them and truncated to uint8.
#pragma once

#include "transforms/auto_augment.h"

namespace ringloader::transforms {

void augmix(const AugmentParams& params, const AugmentDraw& draw, Image& image,
            Image& scratch);

}  // namespace ringloader::transforms
