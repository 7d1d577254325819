// SPDX-License-Identifier: BSD-3-Clause
// The "Custom" op: an ImageOp made by a user's shared library (see
// include/ringloader/custom_op.h), loaded by path.
#pragma once

#include <memory>

#include "transforms/compiled_pipeline.h"
#include "transforms/op_params.h"

namespace ringloader::transforms {

// Reads "library" and "name", loads the library (once per process), and
// builds the op from the remaining parameters. Throws OptionError naming
// the library and op: library not loadable, no entry point, no such op,
// parameters refused.
std::unique_ptr<ImageOp> make_custom_op(OpParams& params);

}  // namespace ringloader::transforms
