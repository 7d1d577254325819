// SPDX-License-Identifier: BSD-3-Clause
// RandomApply, RandomChoice and RandomOrder (torchvision's containers, v1
// and v2) around image ops. Their draws come from the sample's stream, with
// torchvision's distributions: RandomApply one uniform against p,
// RandomChoice one weighted pick, RandomOrder a uniform permutation; the ops
// inside then draw as they would on their own.
#pragma once

#include <functional>
#include <memory>

#include "transforms/compiled_pipeline.h"

namespace ringloader::transforms {

// Builds one nested op (an image op, or a container) from its description;
// `position` is the containing op's place in the pipeline, for messages.
using ImageOpBuilder = std::function<std::unique_ptr<ImageOp>(const Op& op, size_t position)>;

// The container `params` describes ("RandomApply", "RandomChoice" or
// "RandomOrder"). OptionError, naming the op, for an empty list, a weight
// list of the wrong length, or ops whose output channels differ by draw.
std::unique_ptr<ImageOp> make_random_container(OpParams& params, const ImageOpBuilder& build);

}  // namespace ringloader::transforms
