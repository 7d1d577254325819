// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/node_options.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "loader/node/node_order.h"
#include "loader/node/node_socket.h"
#include "loader/trainer/ring_sizing.h"
#include "ringloader/errors.h"

namespace ringloader::node {

void check_node_options(const NodeOptions& node) {
  check_node_name(node.name);
  if (node.trainers < 1 || node.trainers > 1024) {
    throw OptionError("ringloader: NodeOptions::trainers must be 1..1024, got " +
                      std::to_string(node.trainers));
  }
  if (node.lane_slots < 1 || node.lane_slots > 64) {
    throw OptionError("ringloader: NodeOptions::lane_slots must be 1..64, got " +
                      std::to_string(node.lane_slots));
  }
  if (node.device != "cpu" && node.device != "cuda") {
    throw OptionError("ringloader: NodeOptions::device must be \"cpu\" or \"cuda\", got \"" +
                      node.device + "\"");
  }
  if (!node.devices.empty() && node.devices.size() != static_cast<size_t>(node.trainers)) {
    throw OptionError("ringloader: NodeOptions::devices names " +
                      std::to_string(node.devices.size()) + " GPUs for " +
                      std::to_string(node.trainers) + " trainers");
  }
  if (node.first_epoch < 0 || node.epochs < 0) {
    throw OptionError("ringloader: NodeOptions::first_epoch and epochs must be >= 0");
  }
  if (node.cuda_release_timeout_s < 0) {
    throw OptionError("ringloader: NodeOptions::cuda_release_timeout_s must be >= 0");
  }
}

AttachPolicy attach_policy(const NodeOptions& node) {
  AttachPolicy policy;
  policy.uid = geteuid();
  if (!node.allow_group.empty()) {
    policy.group_allowed = true;
    policy.group = resolve_group(node.allow_group, "NodeOptions::allow_group");
  }
  return policy;
}

LoaderOptions node_loader_options(LoaderOptions options, const NodeOptions& node,
                                  int64_t dataset_size, const SampleShape& shape) {
  const int64_t per_epoch =
      batches_per_lane(dataset_size, options, node.trainers) * node.trainers *
      options.batch_size;
  if (node.device == "cpu") {
    // Host lanes hold their batches in ring slots: up to trainers x
    // lane_slots of them, on top of the slots the workers decode ahead into.
    // Why the serve thread then never waits for a held ring slot, whatever
    // the trainers keep: ids run contiguously across epochs (the Loader
    // waits for held slots, so it does not skip them), and epochs are whole
    // rounds of `trainers` batches, so id b is lane b % trainers' batch. When
    // the Loader needs the slot of id b, it last held id h = b - R with
    // R > trainers x lane_slots; lane(h) has since been given its next
    // lane_slots batches (all below b), and the last of those was put into
    // h's lane slot only after that slot was FREE, which dropped h's ring
    // batch (HostNodeLanes::fill). A trainer that keeps batches spills them
    // on its side (AttachedLoader) to free its lane slots.
    const uint64_t slot_bytes =
        static_cast<uint64_t>(options.batch_size) * (shape.bytes() + 2 * sizeof(int64_t));
    // Automatic: a slot per worker and two to spare. A trainer's own Loader
    // keeps about twice that, to ride out its consumer's jitter; here the
    // lanes' READY slots do.
    const int ahead = options.ring_slots > 0
                          ? options.ring_slots
                          : std::min(automatic_ring_slots(options, slot_bytes),
                                     trainer::worker_capacity(options) + 2);
    options.ring_slots = ahead + node.trainers * node.lane_slots;
  }
  options.rank = 0;
  options.world_size = 1;
  options.drop_last = false;
  options.device = "cpu";
  options.pin_memory = options.pin_memory || node.device == "cuda";
  options.max_samples_per_epoch = std::max(options.max_samples_per_epoch, per_epoch);
  return options;
}

}  // namespace ringloader::node
