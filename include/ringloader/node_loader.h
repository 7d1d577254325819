// SPDX-License-Identifier: BSD-3-Clause
// One loader per machine, many trainers: a NodeLoader decodes for every
// trainer process of the node (torchrun starts one per GPU) and hands each
// its own batches through lanes of slots; an AttachedLoader is a trainer's
// side of one lane.
//
//   // the node process (one per machine)
//   ringloader::NodeOptions node;
//   node.name = "imagenet-train";
//   node.trainers = 8;
//   node.device = "cuda";            // lane r's slots on GPU r % GPUs
//   ringloader::NodeLoader server(dataset, pipeline, loader_options, node);
//   server.serve();                  // until its epochs are served or stop()
//
//   // each trainer process (LOCAL_RANK = its lane)
//   ringloader::AttachedLoader loader("imagenet-train");
//   for (int epoch = 0; epoch < 90; ++epoch) {
//     loader.set_epoch(epoch);
//     while (auto batch = loader.next()) train_step(batch->data, batch->target);
//   }
//
// Batches. Each epoch's order (the built-in sampler's, from
// LoaderOptions::seed and shuffle) is padded by wrapping around (or, with
// drop_last, cut) to a whole number of rounds of `trainers` batches, and
// global batch g goes to lane g % trainers. So every lane gets the same
// number of full batches per epoch, the lanes' samples are disjoint within
// an epoch apart from the padding, and a lane's batches do not depend on
// num_workers or on when trainers attach.
//
// Memory. With device "cpu" a batch stays in the node ring's slot that its
// workers decoded it into: the trainer maps the ring and its tensors alias
// that slot, so neither side copies it. The node's ring therefore has
// trainers x lane_slots slots on top of LoaderOptions::ring_slots (or the
// automatic count), and LoaderStats::ring_slots says so. With "cuda" they are
// device memory on the lane's GPU, exported by CUDA IPC handles: the node
// copies each batch from its pinned ring on a copy stream and records an
// event; the trainer's current stream waits on that event (no host sync).
// Dropping the batch's last tensor records an event on the dropping
// thread's current stream, and the slot goes back to the node once that
// event is done (checked by the trainer's next()), so the node never
// overwrites a slot that queued GPU work still reads. Trainers never copy
// through host memory and never decode.
//
// Lockstep. The node produces in global order, so a lane whose trainer is
// slow or absent holds back every lane once its slots are full (trainers of
// one data-parallel job run in lockstep anyway).
//
// Faults. A trainer that dies (or closes its AttachedLoader) gives its lane
// back: the slots it held are reclaimed, and the next trainer to attach to
// that lane goes on with the lane's next batch (the reclaimed batches are
// lost to the lane and counted in NodeStats::reclaimed_slots). The node
// watches the trainer process itself (a pidfd), so a fork child that
// inherited its connection does not keep a dead trainer's lane. A node that
// dies or stops makes every attached trainer's next() throw NodeError
// within about poll_interval_s; nothing waits forever.
//
// Trust (docs/security.md). Only processes of the node's uid attach
// (NodeOptions::allow_group widens that to a group), and a trainer attaches
// only to a node of its own uid (AttachOptions::node_uid). Trainers map the
// node's memory through read-only descriptors, but for the few words of
// their own lane they write (a control memfd made afresh at each attach).
// Host-lane batches are still writable like a DataLoader's, without a
// copy: the ring is mapped private copy-on-write, so an in-place op changes
// only the trainer's own pages, which are dropped when the batch is
// released (before its slot goes back). The node checks every
// such word against what it published. A trainer that writes a word no
// honest trainer could is detached (NodeStats::violations), and its lane
// drops its batches (NodeStats::dropped_batches) until a trainer attaches
// again, so it never stalls the other lanes. Trainers of one node can read
// every lane's batches (they share the node's ring), never change them.
// A CUDA lane's device memory handle goes to that lane's trainer alone (in
// its attach reply); the trainer maps it read-write, so an in-place op on a
// CUDA lane batch changes the lane's slot on the GPU (no one else's; the
// node's next copy into the slot overwrites it). A peer that connects and
// says nothing delays no one: the node reads each attach request as it
// arrives, with a deadline. A trainer uses only the copy of the node's
// header it checked at attach: a node that goes wrong gets it a NodeError.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ringloader/dataset.h"
#include "ringloader/errors.h"
#include "ringloader/export.h"
#include "ringloader/loader.h"
#include "ringloader/transforms.h"

namespace ringloader {

struct RINGLOADER_EXPORT NodeOptions {
  // The node's name: trainers attach to it by this name. It is a socket in
  // the abstract namespace ("@ringloader/<name>"), so it lives in the
  // network namespace (one per container) and vanishes with the node
  // process. Must be 1..80 characters of [A-Za-z0-9._-]. Default: "default".
  std::string name = "default";
  // Lanes: trainer processes served, one batch stream each. Default: 1.
  int trainers = 1;
  // Slots per lane: batches a lane holds ready or leased. 2 lets the node
  // fill one while the trainer trains on the other. Default: 3.
  int lane_slots = 3;
  // "cpu": lanes are shared host memory. "cuda": lane r is device memory on
  // GPU devices[r] (or r % the GPU count when devices is empty), shared by
  // CUDA IPC. The node's ring is pinned for its copies. Default: "cpu".
  std::string device = "cpu";
  std::vector<int> devices;
  // The first epoch served and how many. 0 epochs: until stop(). A
  // trainer's set_epoch() skips forward to a later epoch (its batches are
  // still decoded), never back. Default: 0, 0.
  int64_t first_epoch = 0;
  int64_t epochs = 0;
  // Trainers of other users that may attach: members of this group (a name
  // or a number 0..4294967294; checked with SO_PEERGROUPS). They can then
  // read every lane's batches. Default: "" (only processes of the node's
  // own uid).
  std::string allow_group;
  // With device "cuda": how long the destructor waits for attached trainers
  // to drop their AttachedLoader and batches (their mappings of the lanes'
  // device memory) before it frees that memory. A lane whose trainer is
  // still attached then keeps its memory until the node process exits
  // (freeing it under a reader is undefined). Default: 10.
  double cuda_release_timeout_s = 10;
};

// Summed over the node's life.
struct RINGLOADER_EXPORT NodeStats {
  int64_t batches = 0;               // batches put into lanes
  std::vector<int64_t> lane_batches; // per lane
  int64_t attaches = 0;              // trainers that attached
  int64_t detaches = 0;              // trainers that left or died
  int64_t reclaimed_slots = 0;       // slots taken back from dead trainers
  int64_t violations = 0;            // trainers detached for a bad control word
  int64_t dropped_batches = 0;       // batches of lanes detached for a violation
  double lane_wait_s = 0;            // the node waiting for a free lane slot
  LoaderStats loader;                // the node's own Loader (workers, ring)
  std::string to_string() const;
};

// Threads. serve() runs on one thread (the caller's, or the one start()
// makes); stop(), stats() and the accessors may be called from any thread
// at any time. A second serve() while one runs throws OptionError.
//
// Ownership. The NodeLoader owns its Loader (ring and worker processes),
// the lanes' memory and the socket trainers attach through. Its destructor
// stops serving, tells attached trainers (their next() throws NodeError)
// and frees the lanes; host lanes stay mapped in trainers that still hold
// batches.
class RINGLOADER_EXPORT NodeLoader {
 public:
  // Any thread. Validates options (OptionError), builds the Loader (its
  // workers start), creates the lanes and binds the name; a name already
  // bound by a live process throws OptionError (naming its uid when it is
  // another user's: names are public, any user can bind one first). With device "cuda" it counts
  // the GPUs (OptionError when there are none); device memory, streams and
  // events are made at serve(), on its thread.
  NodeLoader(Dataset dataset, Pipeline pipeline, LoaderOptions options,
             NodeOptions node);
  ~NodeLoader();
  NodeLoader(const NodeLoader&) = delete;
  NodeLoader& operator=(const NodeLoader&) = delete;

  // Serves epochs until they are all served or stop() is called; returns
  // once the lanes hold the last batch (trainers may still be reading).
  // Errors of the Loader (a bad sample with on_error=kRaise) end serving:
  // the trainers' next() throws NodeError naming the cause, then serve()
  // rethrows it.
  void serve();
  // Serves on a thread of its own; stop() (or the destructor) joins it.
  void start();
  // Any thread. Makes serve() return soon; idempotent.
  void stop();
  // Any thread. Whether serve() runs (on any thread).
  bool serving() const;
  // Waits for start()'s thread to end and rethrows the error that ended it
  // (none after stop() or once every epoch was served).
  void join();

  // Batches each lane gets per epoch (len() of an AttachedLoader).
  int64_t batches_per_trainer() const;
  const NodeOptions& node_options() const;
  const SampleShape& sample_shape() const;
  NodeStats stats() const;
  // PIDs of the attached trainers per lane (0: none).
  std::vector<int> trainer_pids() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct RINGLOADER_EXPORT AttachOptions {
  // The lane to take: -1 reads $LOCAL_RANK (0 when unset). Default: -1.
  int trainer = -1;
  // How long the constructor waits for the node to appear (a trainer
  // started before its node), and then as long at most for the node's
  // answer to its attach request. Default: 60.
  double connect_timeout_s = 60;
  // How often next() checks that the node is alive while it waits.
  // Default: 0.1.
  double poll_interval_s = 0.1;
  // The uid the node must run as (checked with SO_PEERCRED before anything
  // it sends is used): -1 for this process's effective uid. A node of
  // another uid (whoever bound the name first) is refused with NodeError.
  // Default: -1.
  int64_t node_uid = -1;
};

// A trainer's side of one lane. Batches are like Loader's: `data` aliases
// the lane slot (host memory, or device memory on the lane's GPU with
// device "cuda"), the slot goes back to the node when the last tensor
// aliasing it dies, and `target` is a copy (on the lane's GPU with "cuda").
// Batches the caller keeps are served as Loader's are: when next() needs a
// slot that a kept batch still holds, that batch is copied out of the lane
// (host memory, or device memory on the current stream) and its storage's
// data pointer swapped, so its tensors and views follow.
//
// Threads: like Loader, one thread at a time calls its methods; batches and
// their tensors may be dropped on any thread. With "cuda", dropping the
// last tensor records a release fence on the dropping thread's current
// stream, so work enqueued there before (reads of the batch) finishes
// before the node overwrites the slot; next() hands fenced slots back.
//
// Ownership: the lane is held until the AttachedLoader is destroyed; host
// batches outlive it (their mapping is shared).
//
// fork(): a child's copies of batches never hand their slots back (the
// parent's batches stay intact); the child cannot lease.
class RINGLOADER_EXPORT AttachedLoader {
 public:
  // Connects to node `name` (waiting up to connect_timeout_s for it to
  // appear) and takes the lane. Throws NodeError if the node is not there
  // in time, runs as another uid, refuses us (another uid, the lane out of
  // range or attached by another live process), or shares memory that
  // fails a check (the message names the node, the lane and the field).
  explicit AttachedLoader(const std::string& name = "default",
                          AttachOptions options = {});
  ~AttachedLoader();
  AttachedLoader(const AttachedLoader&) = delete;
  AttachedLoader& operator=(const AttachedLoader&) = delete;

  // The epoch the next begin_epoch() serves; without a call, each epoch
  // follows the last. An epoch the lane has passed throws OptionError.
  void set_epoch(int64_t epoch);
  // Starts an epoch: the rest of the previous one (if the loop broke off)
  // is skipped.
  void begin_epoch();
  // The epoch's next batch, or nullopt after batches_per_epoch() of them.
  // Throws NodeError when the node died, stopped or failed. `check` (like
  // Loader::next's) runs about every 20 ms while it waits and may throw;
  // the batch is then not lost.
  std::optional<Batch> next(const std::function<void()>& check = nullptr);

  int64_t batches_per_epoch() const;
  int64_t batch_size() const;
  int trainer() const;
  int64_t epoch() const;
  const SampleShape& sample_shape() const;
  // "cpu" or "cuda:N": where batches' data lives.
  std::string device() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringloader
