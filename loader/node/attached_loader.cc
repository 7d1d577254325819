// SPDX-License-Identifier: BSD-3-Clause
// A trainer's side of one lane: connect, map the node's region, copy and
// check its header, then lease the lane's batches in order through the
// slots' state words. The node's own mapping of the region stays writable:
// after attach only the copy is used, and only `state` and `error` are read
// from the region (never as a size, an offset or an index).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <torch/torch.h>

#include "loader/node/attach_checks.h"
#include "loader/node/lane_memory.h"
#include "loader/node/lane_protocol.h"
#include "loader/node/node_layout.h"
#include "loader/node/node_memory.h"
#include "loader/node/node_socket.h"
#include "loader/ring/process_owned.h"
#include "loader/ring/shared_region.h"
#include "loader/trainer/held_batches.h"
#include "loader/trainer/release_fence.h"
#include "loader/trainer/slot_releaser.h"
#include "ringloader/node_loader.h"

namespace ringloader {

using node::NodeHeader;
using node::NodeState;

namespace {

// A slot's fields, each read once (volatile loads): the node may rewrite
// them while we check and use them.
node::LaneSlot read_slot(const node::LaneSlot& mapped) {
  node::LaneSlot slot{};
  slot.rows = node::read_once(mapped.rows);
  slot.lane_batch = node::read_once(mapped.lane_batch);
  slot.epoch = node::read_once(mapped.epoch);
  slot.index = node::read_once(mapped.index);
  slot.ring_offset = node::read_once(mapped.ring_offset);
  return slot;
}

int lane_from_environment() {
  const char* local_rank = std::getenv("LOCAL_RANK");
  if (!local_rank || !*local_rank) return 0;
  char* end = nullptr;
  long value = std::strtol(local_rank, &end, 10);
  if (*end != '\0' || value < 0) {
    throw OptionError(std::string("ringloader: LOCAL_RANK=\"") + local_rank +
                      "\" is not a trainer index");
  }
  return static_cast<int>(value);
}

// The connection, the mappings and the lane memory: shared by the
// AttachedLoader and every live batch, so the lane stays attached (and its
// slots mapped) until the last batch is gone.
struct Attachment {
  std::string name;
  std::string who;  // "node \"name\" (pid N)", for messages
  int socket = -1;
  int lane = 0;
  int node_pid = 0;
  // The process that attached: a fork child's copies of batches never hand
  // slots back, or the node would overwrite the parent's batches.
  ring::MakingProcess maker;
  node::Mapping region;     // read-only
  node::NodeFacts facts;    // the header, copied once at attach and checked
  node::LaneHandle memory_handle{};  // CUDA lanes: from our attach reply
  ring::SharedRegion control;  // this lane's words: ours to write
  // Host lanes: the node's ring, private copy-on-write over a read-only
  // descriptor (batches are writable; the node's ring never is).
  node::Mapping ring;
  std::unique_ptr<node::TrainerLane> protocol;
  std::unique_ptr<node::TrainerLanes> lanes;
  // Hands slots back to the node; with CUDA lanes only once the GPU work
  // that the dropping thread enqueued before the last tensor died is done.
  std::unique_ptr<trainer::SlotReleaser> releaser;

  // The live header: only its `state` and `error` may be read here.
  const NodeHeader* live_header() const {
    return static_cast<const NodeHeader*>(region.data());
  }
  bool owned_here() const { return maker.here(); }
  ~Attachment() {
    if (!owned_here()) {
      // A fork child: the lane, its fences and its GPU mapping are the
      // parent's; only our descriptors close.
      if (releaser) (void)releaser.release();  // the parent's queue, not ours to run
      if (lanes) (void)lanes.release();  // CUDA state is unusable in a child
      if (socket >= 0) close(socket);
      return;
    }
    // Every slot handed back before the node sees us go: it would reclaim
    // a still-leased slot under GPU work of ours that reads it.
    if (releaser) releaser->flush_all();
    lanes.reset();  // CUDA: closes the IPC mapping
    if (socket >= 0) close(socket);
  }
};

// Maps the region (fds[0], read-only), the lane's control (fds[1]) and, for
// host lanes, the ring (fds[2], copy-on-write); takes the descriptors and checks
// everything the node wrote before it is used.
void map_shared(Attachment& attachment, std::vector<int>& fds) {
  const std::string& who = attachment.who;
  if (fds.size() < 2) {
    node::close_all(&fds);
    throw NodeError("ringloader: " + who + " sent " + std::to_string(fds.size()) +
                    " descriptors (mixed ringloader versions)");
  }
  const int region_fd = fds[0], control_fd = fds[1];
  const int ring_fd = fds.size() > 2 ? fds[2] : -1;
  for (size_t i = 3; i < fds.size(); ++i) close(fds[i]);
  fds.clear();
  try {
    attachment.region = node::map_read_only(region_fd, who + "'s region");
  } catch (...) {
    close(control_fd);
    if (ring_fd >= 0) close(ring_fd);
    throw;
  }
  try {
    attachment.control = ring::SharedRegion::attach(control_fd);
  } catch (const std::exception& error) {
    if (ring_fd >= 0) close(ring_fd);
    throw NodeError("ringloader: " + who + "'s lane control: " + error.what());
  }
  if (attachment.region.size() < sizeof(NodeHeader)) {
    if (ring_fd >= 0) close(ring_fd);
    throw NodeError("ringloader: " + who + "'s region is " +
                    std::to_string(attachment.region.size()) +
                    " bytes, less than its header (mixed ringloader versions)");
  }
  // One copy: everything below and after uses it, never the mapping.
  attachment.facts = node::copy_node_header(*attachment.live_header());
  const node::NodeFacts& facts = attachment.facts;
  const bool host = facts.host_lanes();
  if (host && ring_fd < 0) {
    throw NodeError("ringloader: " + who + " sent no ring for its host lanes "
                    "(mixed ringloader versions)");
  }
  if (ring_fd >= 0) {
    if (!host) close(ring_fd);
    else attachment.ring = node::map_copy_on_write(ring_fd, who + "'s ring");
  }
  node::check_node_facts(facts, attachment.region.size(), attachment.ring.size(),
                         attachment.lane, who);
  node::check_control(*static_cast<const node::ControlHeader*>(attachment.control.data()),
                      attachment.control.size(), attachment.lane, facts.lane_slots, who);
}

// The CUDA lane as the trainer knows it from its attach: the checked copy,
// the lane's PCI bus id read once, the handle from its own reply.
node::CudaLane cuda_lane(const Attachment& attachment) {
  node::CudaLane lane;
  lane.lane = static_cast<uint32_t>(attachment.lane);
  lane.slots = attachment.facts.lane_slots;
  lane.slot_data_bytes = attachment.facts.slot_data_bytes;
  auto* headers = reinterpret_cast<const node::LaneHeader*>(
      static_cast<const uint8_t*>(attachment.region.data()) +
      attachment.facts.geometry().lane_headers_offset());
  std::memcpy(lane.pci_bus_id, headers[attachment.lane].pci_bus_id, sizeof(lane.pci_bus_id));
  lane.memory_handle = attachment.memory_handle;
  return lane;
}

std::shared_ptr<Attachment> connect_lane(const std::string& name, int lane,
                                         const AttachOptions& options) {
  auto attachment = std::make_shared<Attachment>();
  attachment->name = name;
  attachment->lane = lane;
  attachment->socket = node::connect_to(name, options.connect_timeout_s);
  // Who is there, before a byte of theirs is used.
  attachment->node_pid = node::check_node_peer(attachment->socket, options.node_uid,
                                               "node \"" + name + "\"");
  attachment->who = "node \"" + name + "\" (pid " + std::to_string(attachment->node_pid) + ")";
  node::AttachRequest request{node::kAttachMagic, node::kAttachVersion, lane, 0};
  if (!node::send_message(attachment->socket, &request, sizeof(request))) {
    throw NodeError("ringloader: " + attachment->who + " closed the connection while trainer " +
                    std::to_string(lane) + " attached");
  }
  // Bounded: a node (or whoever holds the name) that never answers must
  // not hang the trainer.
  node::PartialMessage message(sizeof(node::AttachReply));
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(std::min(options.connect_timeout_s, 1e6)));
  const node::ReadStep step = node::receive_until(attachment->socket, &message, deadline);
  if (step == node::ReadStep::kMore) {
    node::close_all(&message.fds);
    throw NodeError("ringloader: " + attachment->who + " did not answer trainer " +
                    std::to_string(lane) + "'s attach request within " +
                    std::to_string(options.connect_timeout_s) + " s (socket @ringloader/" +
                    name + ", AttachOptions::connect_timeout_s)");
  }
  node::AttachReply reply{};
  std::memcpy(&reply, message.data.data(), sizeof(reply));
  std::vector<int> fds = std::move(message.fds);
  if (step == node::ReadStep::kClosed || reply.magic != node::kAttachMagic) {
    node::close_all(&fds);
    throw NodeError("ringloader: " + attachment->who +
                    " closed the connection while trainer " + std::to_string(lane) +
                    " attached (socket @ringloader/" + name + ")");
  }
  if (!reply.accepted || fds.empty()) {
    node::close_all(&fds);
    throw NodeError("ringloader: " + attachment->who + " refused trainer " +
                    std::to_string(lane) + ": " +
                    std::string(reply.message, strnlen(reply.message, sizeof(reply.message))));
  }
  std::memcpy(attachment->memory_handle.data(), reply.memory_handle,
              attachment->memory_handle.size());
  map_shared(*attachment, fds);
  const node::NodeFacts& facts = attachment->facts;
  const node::NodeGeometry geometry = facts.geometry();
  auto* base = static_cast<const uint8_t*>(attachment->region.data());
  auto* slots = reinterpret_cast<const node::LaneSlot*>(base + geometry.slots_offset()) +
                uint64_t{static_cast<uint32_t>(lane)} * geometry.slots;
  attachment->protocol = std::make_unique<node::TrainerLane>(
      *static_cast<node::ControlHeader*>(attachment->control.data()), slots, geometry.slots);
  attachment->lanes = geometry.host_lanes
                          ? node::make_host_trainer_lanes(
                                *attachment->protocol,
                                static_cast<uint8_t*>(attachment->ring.data()),
                                attachment->ring.size())
                          : node::make_cuda_trainer_lanes(cuda_lane(*attachment));
  node::TrainerLane* protocol = attachment->protocol.get();
  attachment->releaser = std::make_unique<trainer::SlotReleaser>(
      [protocol](uint64_t lane_batch) { protocol->release(lane_batch); });
  if (!geometry.host_lanes) attachment->releaser->set_fences(trainer::make_cuda_fence_source());
  return attachment;
}

}  // namespace

class RINGLOADER_HIDDEN AttachedLoader::Impl {
 public:
  Impl(const std::string& name, AttachOptions options) : options_(options) {
    const int lane = options.trainer >= 0 ? options.trainer : lane_from_environment();
    attachment_ = connect_lane(name, lane, options);
    const node::NodeFacts* h = &attachment_->facts;
    shape_.channels = h->channels;
    shape_.height = h->height;
    shape_.width = h->width;
    shape_.dtype = static_cast<DType>(h->dtype);
    shape_.layout = static_cast<Layout>(h->layout);
    cursor_ = attachment_->protocol->next_lease();  // the node set it: ours from now on
    next_epoch_ = h->first_epoch;
  }

  void set_epoch(int64_t epoch) {
    next_epoch_ = epoch;
    epoch_set_ = true;
    open_ = false;  // the next next() starts that epoch
  }
  void begin_epoch() {
    epoch_ = next_epoch_;
    next_epoch_ = epoch_ + 1;
    next_index_ = 0;
    // Only a trainer's first epoch after attaching may join the lane where
    // it is; later epochs skip what an earlier loop left behind.
    adopt_position_ = first_epoch_ && !epoch_set_;
    first_epoch_ = false;
    epoch_set_ = false;
    open_ = true;
  }
  std::optional<Batch> next(const std::function<void()>& check);

  int64_t per_epoch() const { return attachment_->facts.batches_per_epoch; }
  int64_t batch_size() const { return attachment_->facts.batch_size; }
  int lane() const { return attachment_->lane; }
  int64_t epoch() const { return epoch_; }
  const SampleShape& shape() const { return shape_; }
  std::string device() const {
    torch::Device device = attachment_->lanes->device();
    return device.is_cuda() ? "cuda:" + std::to_string(device.index()) : "cpu";
  }

 private:
  void wait_ready(uint64_t lane_batch, const std::function<void()>& check);
  bool spill_holder(uint64_t lane_batch);
  [[noreturn]] void node_gone() const;
  Batch lease(uint64_t lane_batch, const node::LaneSlot& slot);

  AttachOptions options_;
  std::shared_ptr<Attachment> attachment_;
  SampleShape shape_;
  uint64_t cursor_ = 0;       // the lane batch to lease next
  int64_t epoch_ = 0;
  int64_t next_epoch_ = 0;
  int64_t next_index_ = 0;    // the epoch's next batch index
  bool epoch_set_ = false;
  bool first_epoch_ = true;
  bool adopt_position_ = false;  // take the epoch the lane is at
  bool open_ = false;
  // Batches handed out that may still lease a slot: one this trainer
  // still holds when the lane needs its slot again is copied out.
  trainer::HeldBatches held_;
};

std::optional<Batch> AttachedLoader::Impl::next(const std::function<void()>& check) {
  if (!attachment_->owned_here()) {
    throw NodeError("ringloader: trainer " + std::to_string(lane()) + " of " +
                    attachment_->who + " is attached by pid " +
                    std::to_string(attachment_->maker.pid()) +
                    "; a fork child cannot take batches from its lane");
  }
  if (!open_) begin_epoch();
  if (next_index_ >= per_epoch()) {
    open_ = false;
    return std::nullopt;
  }
  for (;;) {
    wait_ready(cursor_, check);
    // One copy, checked: the node may be another build.
    const node::LaneSlot slot = read_slot(attachment_->protocol->slot_for(cursor_));
    node::check_slot(slot, cursor_, attachment_->facts, lane(), attachment_->who);
    if (adopt_position_) {
      // No set_epoch: go on where the lane is (a trainer that re-attached
      // mid-epoch continues that epoch).
      epoch_ = slot.epoch;
      next_epoch_ = epoch_ + 1;
      next_index_ = slot.index;
      adopt_position_ = false;
    }
    if (slot.epoch > epoch_) {
      throw OptionError("ringloader: trainer " + std::to_string(lane()) + " asked for epoch " +
                        std::to_string(epoch_) + ", but its lane is at epoch " +
                        std::to_string(slot.epoch) + " (a node serves epochs forward only; "
                        "start it with NodeOptions::first_epoch)");
    }
    if (slot.epoch < epoch_ || slot.index < next_index_) {
      // An earlier epoch's batch (set_epoch skipped ahead, or the last loop
      // broke off): skip it.
      attachment_->protocol->lease(cursor_);
      attachment_->protocol->release(cursor_);
      ++cursor_;
      continue;
    }
    next_index_ = slot.index + 1;
    return lease(cursor_++, slot);
  }
}

// The slot of `lane_batch` is leased by an earlier batch this trainer still
// holds (a loop that keeps batches, or one that broke off while the next
// epoch skips ahead): the node can never fill it. Like Loader, copy that
// batch out of the slot (its tensors follow), which releases it.
bool AttachedLoader::Impl::spill_holder(uint64_t lane_batch) {
  // Our own words say which batch holds the slot: lane_batch - S, leased.
  const node::TrainerLane& protocol = *attachment_->protocol;
  if (lane_batch < protocol.slot_count()) return false;
  const uint64_t holder = lane_batch - protocol.slot_count();
  if (protocol.state_of(lane_batch) !=
      node::lane_state(holder, protocol.slot_count(), node::kLaneLeased)) {
    return false;
  }
  // Dead already and queued behind its fence: wait for that fence instead.
  return held_.spill(holder) || attachment_->releaser->flush_through(holder);
}

void AttachedLoader::Impl::wait_ready(uint64_t lane_batch,
                                      const std::function<void()>& check) {
  const node::TrainerLane& protocol = *attachment_->protocol;
  const auto poll_ns = static_cast<int64_t>(std::min(options_.poll_interval_s, 0.02) * 1e9);
  attachment_->releaser->poll();
  spill_holder(lane_batch);
  while (!protocol.wait_ready(lane_batch, poll_ns)) {
    attachment_->releaser->poll();
    spill_holder(lane_batch);
    const NodeHeader* h = attachment_->live_header();
    if (h->state.load(std::memory_order_acquire) !=
            static_cast<uint32_t>(NodeState::kServing) ||
        node::peer_gone(attachment_->socket)) {
      // The node may have published the batch just before it stopped.
      if (protocol.ready(lane_batch)) return;
      node_gone();
    }
    if (check) check();
  }
}

void AttachedLoader::Impl::node_gone() const {
  const NodeHeader* h = attachment_->live_header();
  const node::NodeFacts& facts = attachment_->facts;
  const std::string& who = attachment_->who;
  const std::string waiting = "; trainer " + std::to_string(lane()) + " was waiting for batch " +
                              std::to_string(next_index_) + " of epoch " +
                              std::to_string(epoch_);
  switch (static_cast<NodeState>(h->state.load(std::memory_order_acquire))) {
    case NodeState::kFinished:
      throw NodeError("ringloader: " + who + " served its " + std::to_string(facts.epochs) +
                      " epoch(s) from epoch " + std::to_string(facts.first_epoch) + waiting);
    case NodeState::kStopped:
      throw NodeError("ringloader: " + who + " stopped" + waiting);
    case NodeState::kFailed:
      throw NodeError("ringloader: " + who + " failed: " +
                      std::string(h->error, strnlen(h->error, sizeof(h->error))) + waiting);
    case NodeState::kServing:
      break;
  }
  // A node that detached us says why before it closes the connection.
  node::AttachReply notice{};
  if (recv(attachment_->socket, &notice, sizeof(notice), MSG_DONTWAIT) ==
          static_cast<ssize_t>(sizeof(notice)) &&
      notice.magic == node::kAttachMagic && !notice.accepted) {
    throw NodeError("ringloader: " + who + " " +
                    std::string(notice.message, strnlen(notice.message, sizeof(notice.message))) +
                    waiting);
  }
  throw NodeError("ringloader: " + who + " died" + waiting);
}

Batch AttachedLoader::Impl::lease(uint64_t lane_batch, const node::LaneSlot& slot) {
  const node::TrainerLane& protocol = *attachment_->protocol;
  protocol.lease(lane_batch);
  const node::NodeFacts* h = &attachment_->facts;
  const int64_t rows = slot.rows;  // checked: 1..batch_size
  // Offsets and sizes were checked against the region's size at attach, in
  // the copy: row < lane_count x lane_slots, so row x batch_size x 8 stays
  // below targets' and indices' ends.
  const uint64_t row = uint64_t{static_cast<uint32_t>(lane())} * h->lane_slots +
                       protocol.slot_index(lane_batch);
  auto* base = static_cast<const uint8_t*>(attachment_->region.data());
  auto* targets =
      reinterpret_cast<const int64_t*>(base + h->targets_offset) + row * h->batch_size;
  auto* indices =
      reinterpret_cast<const int64_t*>(base + h->indices_offset) + row * h->batch_size;
  Batch batch;
  batch.epoch = slot.epoch;
  batch.index = slot.index;
  batch.sample_indices.assign(indices, indices + rows);
  torch::Tensor target =
      torch::from_blob(const_cast<int64_t*>(targets), {rows}, torch::kInt64).clone();
  const torch::Device device = attachment_->lanes->device();
  batch.target = device.is_cuda() ? target.to(device) : target;
  std::vector<int64_t> sizes =
      shape_.layout == Layout::kCHW
          ? std::vector<int64_t>{rows, shape_.channels, shape_.height, shape_.width}
          : std::vector<int64_t>{rows, shape_.height, shape_.width, shape_.channels};
  auto release = [attachment = attachment_, lane_batch] {
    // A fork child's copy: the slot is the parent's to hand back.
    if (attachment->owned_here()) attachment->releaser->release(lane_batch);
  };
  batch.data = attachment_->lanes->wrap(
      protocol.slot_index(lane_batch), sizes,
      shape_.dtype == DType::kFloat32 ? torch::kFloat32 : torch::kUInt8, release);
  held_.track(lane_batch, batch.data);
  return batch;
}

AttachedLoader::AttachedLoader(const std::string& name, AttachOptions options)
    : impl_(std::make_unique<Impl>(name, options)) {}
AttachedLoader::~AttachedLoader() = default;
void AttachedLoader::set_epoch(int64_t epoch) { impl_->set_epoch(epoch); }
void AttachedLoader::begin_epoch() { impl_->begin_epoch(); }
std::optional<Batch> AttachedLoader::next(const std::function<void()>& check) {
  return impl_->next(check);
}
int64_t AttachedLoader::batches_per_epoch() const { return impl_->per_epoch(); }
int64_t AttachedLoader::batch_size() const { return impl_->batch_size(); }
int AttachedLoader::trainer() const { return impl_->lane(); }
int64_t AttachedLoader::epoch() const { return impl_->epoch(); }
const SampleShape& AttachedLoader::sample_shape() const { return impl_->shape(); }
std::string AttachedLoader::device() const { return impl_->device(); }

}  // namespace ringloader
