// SPDX-License-Identifier: BSD-3-Clause
// What a NodeLoader makes of its options before it serves: NodeOptions
// checked, who may attach, and the options of the one Loader that decodes
// for every lane of the node.
#pragma once

#include <cstdint>

#include "loader/node/attach_listener.h"
#include "ringloader/node_loader.h"
#include "ringloader/options.h"

namespace ringloader::node {

// Throws OptionError naming the first option out of range.
void check_node_options(const NodeOptions& node);

// The node's own user, and `allow_group`'s members where one is named.
AttachPolicy attach_policy(const NodeOptions& node);

// The Loader's options: one rank of the whole node (rank 0 of 1), orders
// set per epoch, ring deep enough for every host lane's slots.
LoaderOptions node_loader_options(LoaderOptions options, const NodeOptions& node,
                                  int64_t dataset_size, const SampleShape& shape);

}  // namespace ringloader::node
