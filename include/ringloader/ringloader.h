// SPDX-License-Identifier: BSD-3-Clause
// ringloader: the whole public C++ API.
#pragma once

#include "ringloader/dataset.h"
#include "ringloader/errors.h"
#include "ringloader/custom_op.h"
#include "ringloader/loader.h"
#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "ringloader/external.h"
#include "ringloader/node_loader.h"
