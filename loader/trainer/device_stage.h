// SPDX-License-Identifier: BSD-3-Clause
// The trainer's last hop: host batches to GPU device slots. This interface
// has no CUDA types, so the rest of the trainer compiles without CUDA; the
// implementation lives in loader/cuda/ (built when the CUDA Toolkit is
// found) or loader/cuda/no_cuda.cc.
#pragma once

#include <memory>
#include <string>

#include "loader/ring/ring.h"
#include "ringloader/loader.h"

namespace ringloader::trainer {

class DeviceStage {
 public:
  virtual ~DeviceStage() = default;
  // Starts copying a leased host batch into the next free device slot and
  // returns its device tensors; the consumer's current stream is made to
  // wait for the copy. The host slot is released when the copy completes.
  virtual Batch to_device(Batch host_batch) = 0;
  // Whether the next device slot is free (no live batch holds it).
  virtual bool can_accept() const = 0;
  virtual int slot_count() const = 0;
  virtual int64_t batches() const = 0;
};

// Why CUDA cannot be used here, or "" if it can (toolkit compiled in,
// driver and GPU present, libtorch built with CUDA).
std::string cuda_unavailable_reason();

// Builds the stage for options.device ("cuda" or "cuda:N"). Throws
// OptionError naming the reason if that device cannot be used.
std::unique_ptr<DeviceStage> make_device_stage(const LoaderOptions& options,
                                               const SampleShape& shape);

// Page-locks [data, data + bytes) for fast, asynchronous copies. Returns
// false (and says why once on stderr) where CUDA is absent.
bool pin_host_memory(void* data, size_t bytes);
void unpin_host_memory(void* data);

// Owns a pinning: unpins on destruction.
class HostPin {
 public:
  HostPin() = default;
  HostPin(const HostPin&) = delete;
  HostPin& operator=(const HostPin&) = delete;
  ~HostPin() { reset(); }
  void pin(void* data, size_t bytes) {
    reset();
    if (pin_host_memory(data, bytes)) data_ = data;
  }
  void reset() {
    if (data_) unpin_host_memory(data_);
    data_ = nullptr;
  }
  bool pinned() const { return data_ != nullptr; }

 private:
  void* data_ = nullptr;
};

}  // namespace ringloader::trainer
