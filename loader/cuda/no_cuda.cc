// SPDX-License-Identifier: BSD-3-Clause
// Built instead of loader/cuda/ when the CUDA Toolkit was not found: the
// loader runs host-only and says so when a GPU is asked for.
#include <cstdio>

#include "loader/trainer/device_stage.h"
#include "loader/node/lane_memory.h"
#include "loader/trainer/release_fence.h"
#include "ringloader/errors.h"

namespace ringloader::trainer {

std::string cuda_unavailable_reason() {
  return "ringloader was built without the CUDA Toolkit";
}

std::unique_ptr<DeviceStage> make_device_stage(const LoaderOptions& options,
                                               const SampleShape&) {
  throw OptionError("ringloader: device '" + options.device +
                    "' requested, but " + cuda_unavailable_reason() +
                    "; use device = \"cpu\"");
}

bool pin_host_memory(void*, size_t) { return false; }
void unpin_host_memory(void*) {}

// Nothing is pinned without CUDA, so nothing can read a slot asynchronously.
std::unique_ptr<FenceSource> make_cuda_fence_source() { return nullptr; }

}  // namespace ringloader::trainer

namespace ringloader::node {

std::unique_ptr<NodeLanes> make_cuda_node_lanes(NodeHeader*, bool) {
  throw OptionError("ringloader: NodeOptions::device \"cuda\", but " +
                    trainer::cuda_unavailable_reason() + "; use device \"cpu\"");
}

std::unique_ptr<TrainerLanes> make_cuda_trainer_lanes(const CudaLane&) {
  throw NodeError("ringloader: the node's lanes are on a GPU, but this trainer's " +
                  trainer::cuda_unavailable_reason());
}

}  // namespace ringloader::node
