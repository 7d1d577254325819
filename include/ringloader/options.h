// SPDX-License-Identifier: BSD-3-Clause
// LoaderOptions: how a Loader (loader.h) or NodeLoader (node_loader.h) is
// configured. Plain data with no torch in it, so code that only does
// arithmetic on options (ring sizing, rank resolution, node order) builds
// without torch.
//
// Every option is a row of the option table (option_specs.h): its name, type
// and checks; the defaults below are the only place a default is written
// (the table, the Python binding and DataLoader read them from here).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringloader/export.h"

namespace ringloader {

// What next() does when the slot it needs is held by a batch still alive
// (see the top of loader.h).
enum class HeldBatches {
  kSpill,  // copy the held batch out of the ring and go on
  kRaise,  // throw LeaseError: every slot is held
};

// What a sample that cannot be read or decoded does (see on_error below).
enum class OnError {
  kRaise,  // its batch raises DecodeError / IoError
  kSkip,   // it is replaced by another sample of the dataset
};

struct RINGLOADER_EXPORT LoaderOptions {
  // num_workers = kAutoWorkers: the Loader picks the worker count by
  // measurement (docs/architecture.md, "Autotuned workers"). It starts with
  // one worker and adds one while the trainer stalls on batches and cores
  // sit idle, and stops once another worker no longer raises throughput (by
  // 10%), at the latest at max_auto_workers. Each decision is logged to
  // stderr and listed in LoaderStats::autotune_decisions. Bytes and order do
  // not depend on the count. Native datasets only (not ExternalWorkers).
  static constexpr int kAutoWorkers = -1;

  // Samples per batch. Default: 1.
  int64_t batch_size = 1;
  // 0 runs the pipeline in the trainer process (oneTBB spreads a batch over
  // intra_op_threads cores); > 0 spawns that many worker processes;
  // kAutoWorkers chooses. Default: 0.
  int num_workers = 0;
  // Most workers kAutoWorkers may reach. 0: the online cores. Default: 0.
  int max_auto_workers = 0;
  // Batches in the ring (K). 0 picks max(4, 2 * W), W = num_workers (or
  // the most workers kAutoWorkers may reach): two slots per worker, the one
  // the trainer holds among them (torch's prefetch_factor=2), then lowers it
  // (to 2 at least) until the ring's slot data fits ring_memory_budget_bytes.
  // Every slot stays resident, so each one more costs a batch of memory;
  // a deeper ring absorbs uneven batch times (docs/peers.md, "Ring depth").
  // Default: 0.
  int ring_slots = 0;
  // Bytes of slot data the automatic ring_slots may use. 0: a quarter of the
  // machine's physical memory. Ignored when ring_slots is given. Default: 0.
  uint64_t ring_memory_budget_bytes = 0;
  // A new permutation of the dataset each epoch. Default: false.
  bool shuffle = false;
  // Drop the last, short batch of an epoch. Default: false.
  bool drop_last = false;
  // Kept batches: spilled out of the ring, or LeaseError. Default: kSpill.
  // (Python spells it "spill" / "raise".)
  HeldBatches held_batches = HeldBatches::kSpill;
  // Seeds the per-epoch shuffle and every sample's augmentation stream.
  // Default: 0.
  uint64_t seed = 0;
  // Threads that decode the samples of one batch in parallel, per worker
  // process (or in the trainer with num_workers = 0). 0 = all cores when
  // num_workers = 0, else 1. Default: 0.
  int intra_op_threads = 0;
  // Added to each worker process's nice value (setpriority), Python
  // workers included. 0 keeps the trainer's priority, as torch's workers
  // do. Above 0 a trainer waking for its next batch gets a core sooner
  // (2 cores, one other busy process: its p99 wait 3.29 ms at 0, 0.41 ms
  // at 5), but the workers also yield their share to every other busy
  // process, another job on the machine or the trainer's own intra-op
  // threads, which spin after each parallel region (there, a WebDataset
  // stream in Python workers ran at 1.21x torch's speed at 0, 0.89x at 5;
  // bench/worker_priority.py, docs/drop_in.md, "Workers and other
  // processes"). 0 to 19. Default: 0.
  int worker_nice = 0;
  // Images with more pixels are refused before decoding (decompression
  // bombs). Default: 178956970 (Pillow's limit).
  int64_t max_image_pixels = 178956970;
  // Path of the ringloader-worker executable. Empty: the one installed next
  // to libringloader, or $RINGLOADER_WORKER. Default: "".
  std::string worker_executable;
  // How long the iterator waits for one batch before it checks the workers
  // (alive, not hung) again. Only a wait with no live worker is an error.
  // Default: 0.1.
  double poll_interval_s = 0.1;
  // > 0: next() raises WorkerError after waiting this long for one batch
  // (torch's DataLoader timeout). 0 waits as long as workers are alive.
  // Default: 0.
  double timeout_s = 0;
  // --- Faults (see docs/faults.md) ---
  // A worker that spends longer than this on one sample (a read blocked on
  // a dead network mount, a decoder in an endless loop) is hung: it is
  // killed and replaced, and its batch is re-done. A worker that dies (a
  // signal, an OOM kill) is replaced the same way, at once. A worker not
  // attached to the ring yet is judged from its start instead, over the
  // longer of this and $RINGLOADER_WORKER_START_TIMEOUT_S (120 s if unset):
  // a Python worker's start runs worker_init_fn. 0: never judge a worker
  // hung. Default: 120.
  double hang_timeout_s = 120;
  // A batch re-done this many times that takes down yet another worker is
  // given up: the iterator raises WorkerError naming the worker, the batch,
  // the sample and its file. Default: 2.
  int max_batch_retries = 2;
  // What a sample that cannot be read or decoded does:
  //   kRaise: its batch raises DecodeError / IoError naming the file, the
  //           sample index and the reason (the iterator can go on after it);
  //   kSkip:  it is replaced by another sample of the dataset, picked by a
  //           pure function of (seed, epoch, sample), so batches stay full
  //           and the epoch stays deterministic; each skip is logged to
  //           stderr and counted in LoaderStats::skipped_samples. Native
  //           datasets only (OptionError at construction otherwise).
  // Default: kRaise. (Python and the worker config spell it "raise"/"skip".)
  OnError on_error = OnError::kRaise;
  // Most samples an epoch may list through set_order() (a sampler drawing
  // with replacement can list more than the dataset holds). 0: dataset size.
  // Default: 0.
  int64_t max_samples_per_epoch = 0;

  // --- Distributed training (torchrun) ---
  // This process's rank and the number of ranks. Each rank iterates a
  // disjoint shard of one permutation per (seed, epoch), padded like torch's
  // DistributedSampler (every world_size-th index, wrapping around) so all
  // ranks get the same number of batches. -1 reads $RANK / $WORLD_SIZE when
  // set, else 0 / 1. Orders given through set_order() are used as they are.
  // Default: -1 (both).
  int rank = -1;
  int world_size = -1;

  // --- GPU stage (used when built with the CUDA Toolkit and a GPU exists) ---
  // "cpu" keeps batches on the host. "cuda" (GPU $LOCAL_RANK when set, else
  // the current device at the first iteration) / "cuda:N" copies each ready
  // batch into one of `device_slots` buffers on GPU N, on a dedicated copy
  // stream; the current stream waits on the copy's event (no host sync).
  // Throws OptionError at construction if that device cannot be used (which
  // only counts GPUs: device memory and streams are made at the first
  // iteration). Default: "cpu".
  std::string device = "cpu";
  // Batches staged on the GPU ahead of the trainer. Default: 3.
  int device_slots = 3;
  // Page-lock the ring (cudaHostRegister) when CUDA is present, so copies
  // run at full PCIe speed, also for device "cpu" (like torch's
  // pin_memory). Implied by a "cuda" device. Workers never touch CUDA.
  // CUDA is touched only from the first iteration on (begin() /
  // begin_epoch()), on the calling thread's current device, never at
  // construction. With a pinned ring, a slot whose last tensor dies goes
  // back to the workers only once the work enqueued on the releasing
  // thread's current CUDA stream at that moment is done (so
  // tensor.to(cuda, non_blocking=true) then dropping the tensor is safe).
  // Default: false (torch's DataLoader default).
  bool pin_memory = false;
  // On-device finishing for uint8 pipelines (no ToTensor): the GPU converts
  // to float32 CHW, scales by 1/255 and normalizes with these per-channel
  // values, so the copy moves 4x fewer bytes. Empty: batches stay uint8.
  // Default: [] (both).
  std::vector<double> device_normalize_mean;
  std::vector<double> device_normalize_std;
};

// The ring_slots a Loader picks when `options.ring_slots` is 0, for slots of
// `slot_bytes` bytes (the rule under ring_slots above; 0 bytes: no budget
// limit). Python's loader of Python datasets sizes its ring with it too.
// Thread-safe: reads only the options and the machine's core count and
// memory size.
RINGLOADER_EXPORT int automatic_ring_slots(const LoaderOptions& options, uint64_t slot_bytes);

// How long a worker may take to start, up to the moment it attaches to the
// ring: at least $RINGLOADER_WORKER_START_TIMEOUT_S (Default: 120 s, as the
// Python zygote's start), never less than `hang_timeout_s`, and 0 (no
// bound) when hang_timeout_s is 0. Starting a Python loader's workers
// includes its loader server unpickling the dataset (importing its
// modules) and reading sample 0, then each worker's worker_init_fn, all of
// which a slow file system stretches past any per-sample bound. Throws
// OptionError naming the variable when it is not a number > 0.
// Thread-safe: reads only the environment.
RINGLOADER_EXPORT double worker_start_timeout_s(double hang_timeout_s);

}  // namespace ringloader
