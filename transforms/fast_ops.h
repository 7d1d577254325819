// SPDX-License-Identifier: BSD-3-Clause
// PipelineMode::kFast versions of the ops that dominate a pipeline's time:
// RandomResizedCrop (reduced-scale region decode + OpenCV resize) and
// Resize (OpenCV resize). Same parameters and random draws as the exact
// ops; pixels differ by a few levels (docs/transforms.md).
#pragma once

#include <memory>

#include "transforms/compiled_pipeline.h"
#include "transforms/op_params.h"

namespace ringloader::transforms {

// False when the library was built without OpenCV (no fast mode).
bool fast_mode_available();

// The fast op for `params.op()`, reading (and validating) its parameters;
// nullptr when the op has no fast version, so the exact one runs.
std::unique_ptr<ImageOp> make_fast_image_op(OpParams& params);

}  // namespace ringloader::transforms
