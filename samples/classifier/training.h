// SPDX-License-Identifier: BSD-3-Clause
// The training run: loaders, the one-cycle schedule, per-epoch evaluation,
// checkpoints, pictures and the closing report.
#pragma once

#include "classifier/experiment.h"
#include "classifier/options.h"

namespace classifier {

// Returns the process exit status: 0, or 1 when a target was missed.
int train_and_evaluate(const Options& options, Experiment& experiment);

}  // namespace classifier
