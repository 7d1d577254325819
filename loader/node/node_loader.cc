// SPDX-License-Identifier: BSD-3-Clause
// The node loader: one Loader (ring, workers) decodes the node's global
// order; the serve thread deals its batches out to the lanes in order.
//
//   Loader::next() -> batch g -> lane g % L: wait FREE(n) -> fill -> READY(n)
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include <torch/torch.h>

#include "loader/node/attach_listener.h"
#include "loader/node/lane_memory.h"
#include "loader/node/lane_protocol.h"
#include "loader/node/node_lane.h"
#include "loader/node/node_layout.h"
#include "loader/node/node_memory.h"
#include "loader/node/node_options.h"
#include "loader/node/node_order.h"
#include "loader/node/node_socket.h"
#include "loader/ring/futex.h"
#include "loader/ring/process_owned.h"
#include "loader/ring/shared_region.h"
#include "loader/trainer/loader_access.h"
#include "ringloader/node_loader.h"

namespace ringloader {

using node::NodeHeader;
using node::NodeLane;
using node::NodeState;

namespace {

struct StopServing {};

}  // namespace

class RINGLOADER_HIDDEN NodeLoader::Impl {
 public:
  Impl(Dataset dataset, Pipeline pipeline, LoaderOptions options, NodeOptions node)
      : node_(std::move(node)), options_(options), dataset_size_(dataset.size()) {
    node::check_node_options(node_);
    const node::AttachPolicy policy = node::attach_policy(node_);
    per_lane_ = node::batches_per_lane(dataset_size_, options_, node_.trainers);
    // The name first: a taken name fails before any worker is spawned.
    int listen_fd = node::listen_on(node_.name);
    try {
      build(std::move(dataset), std::move(pipeline), listen_fd, policy);
    } catch (...) {
      if (!listener_) close(listen_fd);
      throw;
    }
  }

  void build(Dataset dataset, Pipeline pipeline, int listen_fd, node::AttachPolicy policy) {
    const SampleShape shape = pipeline.output_shape(
        dataset.color_mode(), dataset.image_height(), dataset.image_width());
    loader_ = std::make_unique<Loader>(
        std::move(dataset), std::move(pipeline),
        node::node_loader_options(options_, node_, dataset_size_, shape));
    // Lanes hold ring batches that trainers read: never spill them.
    internal::LoaderAccess::wait_for_held_slots(*loader_);
    create_region();
    create_lanes();
    // Trainers only read the region and the ring: they get read-only
    // descriptors (node_memory.h).
    shared_fds_.push_back(node::reopen_read_only(region_.fd()));
    if (node_.device == "cuda") {
      memory_ = node::make_cuda_node_lanes(header(), !node_.devices.empty());
    } else {
      const int ring_fd = internal::LoaderAccess::ring_fd(*loader_);
      fchmod(ring_fd, 0600);  // no other uid reopens it writable
      memory_ = node::make_host_node_lanes(lane_pointers(),
                                           internal::LoaderAccess::ring_base(*loader_),
                                           internal::LoaderAccess::ring_bytes(*loader_));
      shared_fds_.push_back(node::reopen_read_only(ring_fd));
    }
    // Before any trainer can attach: a trainer reads its lane's PCI bus id
    // at attach, once, and gets its device memory handle in the reply.
    memory_->open();
    // Each lane's handle goes to its own trainer, in its attach reply.
    node::NodeLanes* memory = memory_.get();
    listener_ = std::make_unique<node::AttachListener>(
        node_.name, listen_fd, shared_fds_, lane_pointers(), lane_headers(), policy,
        [memory](uint32_t lane) { return memory->lane_handle(lane); });
  }

  bool made_here() const { return maker_.here(); }
  ~Impl() {
    stop();
    if (thread_.joinable()) thread_.join();
    finish(NodeState::kStopped, "");
    // Copies in flight read the ring: let them end before it goes.
    if (memory_) reap_until_copied();
    if (memory_ && listener_ && node_.device == "cuda") retire_device_memory();
    listener_.reset();  // closes connections: trainers see the node go
    memory_.reset();
    for (int fd : shared_fds_) close(fd);
  }

  void serve() {
    if (serving_.exchange(true, std::memory_order_acq_rel)) {
      throw OptionError("ringloader: NodeLoader::serve() is already running");
    }
    serve_loop();
  }
  void start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (thread_.joinable() || serving()) {
      throw OptionError("ringloader: NodeLoader already serving");
    }
    serving_.store(true, std::memory_order_release);  // serving from now on
    thread_ = std::thread([this] {
      try {
        serve_loop();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
      }
    });
  }
  void stop() { stopping_.store(true, std::memory_order_release); }
  bool serving() const { return serving_.load(std::memory_order_acquire); }
  void join() {
    if (thread_.joinable()) thread_.join();
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::swap(error, error_);
    }
    if (error) std::rethrow_exception(error);
  }

  NodeStats stats() const;
  std::vector<int> trainer_pids() const { return listener_->trainer_pids(); }
  int64_t per_lane() const { return per_lane_; }
  const NodeOptions& node() const { return node_; }
  const SampleShape& shape() const { return loader_->sample_shape(); }

 private:
  NodeHeader* header() const { return static_cast<NodeHeader*>(region_.data()); }
  node::LaneHeader* lane_headers() const;
  std::vector<NodeLane*> lane_pointers() const;
  node::NodeGeometry geometry() const;
  void create_region();
  void create_lanes();
  void serve_loop();  // serving_ is set; clears it
  void serve_epoch(int64_t epoch);
  void put(uint32_t lane, Batch batch, int64_t epoch, int64_t index);
  bool wait_for_slot(NodeLane& lane);
  void reap();
  void reap_until_copied();  // publishes every queued copy
  void retire_device_memory();
  void finish(NodeState state, const std::string& error);

  NodeOptions node_;
  LoaderOptions options_;
  int64_t dataset_size_;
  int64_t per_lane_ = 0;
  std::unique_ptr<Loader> loader_;
  node::Mapping region_;
  std::vector<int> shared_fds_;  // read-only: the region's, the ring's
  std::vector<std::unique_ptr<NodeLane>> lanes_;
  std::unique_ptr<node::NodeLanes> memory_;
  std::unique_ptr<node::AttachListener> listener_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> serving_{false};
  ring::MakingProcess maker_;
  mutable std::mutex mutex_;  // stats_, thread_
  int64_t batches_ = 0;
  double lane_wait_s_ = 0;
  std::exception_ptr error_;  // what ended start()'s thread
  std::thread thread_;
};

node::NodeGeometry NodeLoader::Impl::geometry() const {
  node::NodeGeometry geometry;
  geometry.lanes = static_cast<uint32_t>(node_.trainers);
  geometry.slots = static_cast<uint32_t>(node_.lane_slots);
  geometry.batch_size = options_.batch_size;
  geometry.data_bytes = loader_->sample_shape().bytes() * options_.batch_size;
  geometry.host_lanes = node_.device == "cpu";
  return geometry;
}

void NodeLoader::Impl::create_region() {
  const node::NodeGeometry layout = geometry();
  region_ = node::create_node_region("ringloader-node-" + node_.name, layout.total_bytes());
  NodeHeader* h = header();
  const SampleShape& shape = loader_->sample_shape();
  h->magic = node::kNodeMagic;
  h->layout_version = node::kNodeLayoutVersion;
  h->lane_count = layout.lanes;
  h->lane_slots = layout.slots;
  h->device = static_cast<uint32_t>(layout.host_lanes ? node::LaneDevice::kHost
                                                     : node::LaneDevice::kCuda);
  h->batch_size = options_.batch_size;
  h->batches_per_epoch = per_lane_;
  h->first_epoch = node_.first_epoch;
  h->epochs = node_.epochs;
  h->slot_data_bytes = layout.slot_data_bytes();
  h->data_bytes = layout.data_bytes;
  h->channels = shape.channels;
  h->height = shape.height;
  h->width = shape.width;
  h->dtype = static_cast<uint32_t>(shape.dtype);
  h->layout = static_cast<uint32_t>(shape.layout);
  h->node_pid = getpid();
  h->targets_offset = layout.targets_offset();
  h->indices_offset = layout.indices_offset();
  h->ring_bytes = layout.host_lanes ? internal::LoaderAccess::ring_bytes(*loader_) : 0;
  h->total_bytes = layout.total_bytes();
  node::LaneHeader* lanes = lane_headers();
  for (int i = 0; i < node_.trainers; ++i) {
    lanes[i].device = node_.devices.empty() ? i : node_.devices[i];
  }
  h->state.store(static_cast<uint32_t>(NodeState::kServing), std::memory_order_release);
}

node::LaneHeader* NodeLoader::Impl::lane_headers() const {
  return reinterpret_cast<node::LaneHeader*>(static_cast<uint8_t*>(region_.data()) +
                                             geometry().lane_headers_offset());
}

void NodeLoader::Impl::create_lanes() {
  const node::NodeGeometry layout = geometry();
  auto* slots = reinterpret_cast<node::LaneSlot*>(static_cast<uint8_t*>(region_.data()) +
                                                  layout.slots_offset());
  for (uint32_t i = 0; i < layout.lanes; ++i) {
    // A violation wakes the attach thread, which exists by then: a lane
    // has no trainer, so no violation, before the listener accepted one.
    lanes_.push_back(std::make_unique<NodeLane>(i, layout.slots,
                                                slots + uint64_t{i} * layout.slots,
                                                [this] { listener_->notify(); }));
  }
}

std::vector<NodeLane*> NodeLoader::Impl::lane_pointers() const {
  std::vector<NodeLane*> out;
  for (const auto& lane : lanes_) out.push_back(lane.get());
  return out;
}

void NodeLoader::Impl::serve_loop() {
  try {
    for (int64_t epoch = node_.first_epoch;
         node_.epochs == 0 || epoch < node_.first_epoch + node_.epochs; ++epoch) {
      serve_epoch(epoch);
    }
    // The last epoch's copies: only reap() makes them READY, and once the
    // last batch is put nothing waits, so nothing else would reap them.
    reap_until_copied();
    if (stopping_.load(std::memory_order_acquire)) throw StopServing{};
    finish(NodeState::kFinished, "");
  } catch (const StopServing&) {
    finish(NodeState::kStopped, "");
  } catch (const std::exception& error) {
    finish(NodeState::kFailed, error.what());
    serving_.store(false, std::memory_order_release);
    throw;
  }
  serving_.store(false, std::memory_order_release);
}

void NodeLoader::Impl::serve_epoch(int64_t epoch) {
  loader_->set_epoch(epoch);
  loader_->set_order(node::node_epoch_order(dataset_size_, options_, node_.trainers, epoch));
  loader_->begin_epoch();
  const Loader::WaitCheck check = [this] {
    reap();
    if (stopping_.load(std::memory_order_acquire)) throw StopServing{};
  };
  int64_t global = 0;
  while (std::optional<Batch> batch = loader_->next(check)) {
    const auto lane = static_cast<uint32_t>(global % node_.trainers);
    put(lane, std::move(*batch), epoch, global / node_.trainers);
    ++global;
  }
}

// Copies end on their own (an H2D copy needs nothing from us), so this
// waits milliseconds, stopping or not.
void NodeLoader::Impl::reap_until_copied() {
  while (memory_->in_flight() > 0) {
    reap();
    if (memory_->in_flight() > 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void NodeLoader::Impl::put(uint32_t lane_index, Batch batch, int64_t epoch, int64_t index) {
  reap();  // copies done since the last wait: their trainers need not wait on ours
  NodeLane& lane = *lanes_[lane_index];
  if (!wait_for_slot(lane)) {
    lane.dropped();  // the batch's ring slot goes back to the workers
    return;
  }
  const uint64_t lane_batch = lane.next_batch();
  const auto slot = static_cast<uint32_t>(lane_batch % lane.slot_count());
  const uint64_t row = uint64_t{lane_index} * node_.lane_slots + slot;
  auto* base = static_cast<uint8_t*>(region_.data());
  const int64_t rows = batch.target.numel();
  // Offsets from our own geometry, not from the region's header: that is
  // shared memory, what the node tells trainers, not what it relies on.
  const node::NodeGeometry layout = geometry();
  std::memcpy(base + layout.targets_offset() + row * options_.batch_size * 8,
              batch.target.contiguous().data_ptr<int64_t>(), rows * 8);
  std::memcpy(base + layout.indices_offset() + row * options_.batch_size * 8,
              batch.sample_indices.data(), batch.sample_indices.size() * 8);
  node::LaneSlot& fields = lane.slot(slot);
  fields.rows = static_cast<uint32_t>(rows);
  fields.lane_batch = lane_batch;
  fields.epoch = epoch;
  fields.index = index;
  const bool in_place = memory_->fill(lane_index, slot, std::move(batch));
  lane.filled();
  if (in_place) lane.published();  // else once reap() sees its copy done
  std::lock_guard<std::mutex> lock(mutex_);
  ++batches_;
}

bool NodeLoader::Impl::wait_for_slot(NodeLane& lane) {
  const uint64_t started = ring::monotonic_ns();
  // With copies in flight, look at them every millisecond: a trainer of
  // another lane may be waiting for one to become READY.
  constexpr int64_t kRecheckNs = 20'000'000, kCopyRecheckNs = 1'000'000;
  NodeLane::Wait wait;
  while ((wait = lane.wait_free(memory_->in_flight() > 0 ? kCopyRecheckNs : kRecheckNs)) ==
         NodeLane::Wait::kBusy) {
    reap();
    if (stopping_.load(std::memory_order_acquire)) throw StopServing{};
  }
  std::lock_guard<std::mutex> lock(mutex_);
  lane_wait_s_ += (ring::monotonic_ns() - started) * 1e-9;
  return wait == NodeLane::Wait::kFill;
}

void NodeLoader::Impl::reap() {
  memory_->reap([this](uint32_t lane) { lanes_[lane]->published(); });
}

void NodeLoader::Impl::retire_device_memory() {
  // Trainers map the lanes' device memory (CUDA IPC) until they drop their
  // AttachedLoader and batches; freeing an exported allocation under an
  // importer is undefined. They were told the node stopped: wait for them.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(node_.cuda_release_timeout_s);
  std::vector<int> pids = listener_->trainer_pids();
  while (std::any_of(pids.begin(), pids.end(), [](int pid) { return pid != 0; }) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pids = listener_->trainer_pids();
  }
  std::vector<bool> attached;
  for (int pid : pids) attached.push_back(pid != 0);
  memory_->retire(attached);
}

void NodeLoader::Impl::finish(NodeState state, const std::string& error) {
  NodeHeader* h = header();
  if (h->state.load(std::memory_order_acquire) != static_cast<uint32_t>(NodeState::kServing)) {
    return;
  }
  std::snprintf(h->error, sizeof(h->error), "%s", error.c_str());
  // Release: a trainer that sees kFailed reads the error text.
  h->state.store(static_cast<uint32_t>(state), std::memory_order_release);
  // Trainers wait on their slots' words; wake them so they look at the state.
  for (const auto& lane : lanes_) lane->wake_trainer();
}

NodeStats NodeLoader::Impl::stats() const {
  NodeStats stats;
  node::AttachCounts counts = listener_->counts();
  stats.attaches = counts.attaches;
  stats.detaches = counts.detaches;
  for (const auto& lane : lanes_) {
    const node::LaneCounts lane_counts = lane->counts();
    stats.reclaimed_slots += lane_counts.reclaimed_slots;
    stats.violations += lane_counts.violations;
    stats.dropped_batches += lane_counts.dropped_batches;
    stats.lane_batches.push_back(static_cast<int64_t>(lane->next_batch()) -
                                 lane_counts.dropped_batches);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats.batches = batches_;
  stats.lane_wait_s = lane_wait_s_;
  stats.loader = loader_->stats();
  return stats;
}

std::string NodeStats::to_string() const {
  std::ostringstream out;
  out << "node: " << batches << " batches into lanes (";
  for (size_t i = 0; i < lane_batches.size(); ++i) out << (i ? " " : "") << lane_batches[i];
  out << "), " << attaches << " attaches, " << detaches << " detaches, " << reclaimed_slots
      << " reclaimed slots, " << violations << " violations, " << dropped_batches
      << " dropped batches, lane wait " << lane_wait_s << " s\n"
      << loader.to_string();
  return out.str();
}

NodeLoader::NodeLoader(Dataset dataset, Pipeline pipeline, LoaderOptions options,
                       NodeOptions node)
    : impl_(std::make_unique<Impl>(std::move(dataset), std::move(pipeline), options,
                                   std::move(node))) {}
NodeLoader::~NodeLoader() {
  // A fork child's copy: the serving thread, the listener and the lanes are
  // the parent's (ring/process_owned.h).
  if (impl_ && !impl_->made_here()) (void)impl_.release();
}
void NodeLoader::serve() { impl_->serve(); }
void NodeLoader::start() { impl_->start(); }
void NodeLoader::stop() { impl_->stop(); }
bool NodeLoader::serving() const { return impl_->serving(); }
void NodeLoader::join() { impl_->join(); }
int64_t NodeLoader::batches_per_trainer() const { return impl_->per_lane(); }
const NodeOptions& NodeLoader::node_options() const { return impl_->node(); }
const SampleShape& NodeLoader::sample_shape() const { return impl_->shape(); }
NodeStats NodeLoader::stats() const { return impl_->stats(); }
std::vector<int> NodeLoader::trainer_pids() const { return impl_->trainer_pids(); }

}  // namespace ringloader
