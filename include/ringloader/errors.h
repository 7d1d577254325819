// SPDX-License-Identifier: BSD-3-Clause
// Typed errors. Every message names what failed (file, sample index, batch,
// worker) and why, so a user can act on it without a debugger.
// Implemented in base/errors.cc (the lowest layer, below transforms/ and
// loader/).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ringloader/export.h"

namespace ringloader {

// Base of every error ringloader throws.
class RINGLOADER_EXPORT Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A constructor argument or option is invalid (batch size 0, unknown
// transform, pipeline whose output shape is not fixed, ...). Thrown at Loader
// construction, never from a worker. Maps to Python's ValueError.
class RINGLOADER_EXPORT OptionError : public Error {
 public:
  using Error::Error;
};

// A file or folder could not be read: missing, unreadable, empty dataset.
// Maps to Python's OSError.
class RINGLOADER_EXPORT IoError : public Error {
 public:
  using Error::Error;
};

// A sample's bytes could not be decoded: corrupt, truncated, unsupported
// format, or larger than the configured pixel limit. Maps to Python's
// ValueError subclass ringloader.DecodeError.
class RINGLOADER_EXPORT DecodeError : public Error {
 public:
  using Error::Error;
};

// A batch a worker reported FAILED, as the trainer read it from the ring:
// which batch and which worker, never taken from the error's text (which
// starts with the sample's name, chosen by whoever made the data). Python
// workers' exception records are matched to the error by these fields.
struct FailedBatch {
  uint64_t batch_id = 0;   // the ring's id of the batch
  int64_t epoch = 0;       // the batch's epoch and its index in it
  int64_t index = 0;
  int32_t worker = -1;     // the worker index the slot names as its filler, or -1
  int64_t worker_pid = 0;  // that worker's pid, 0 when unknown
};

// A worker process failed (died, hung) or reported an error while producing
// a batch. The message names the worker, the batch and, when known, the
// sample and file. Maps to Python's RuntimeError (ringloader.WorkerError,
// with the attributes batch_id, epoch, batch_index, worker and worker_pid
// when a worker reported the batch failed; absent otherwise).
class RINGLOADER_EXPORT WorkerError : public Error {
 public:
  using Error::Error;
  WorkerError(const std::string& message, const FailedBatch& failed)
      : Error(message), failed_(failed), reported_(true) {}
  // The batch a worker reported failed; nullptr for other worker errors (a
  // death, a hang, a protocol violation). Owned by the exception.
  const FailedBatch* failed_batch() const noexcept { return reported_ ? &failed_ : nullptr; }

 private:
  FailedBatch failed_{};
  bool reported_ = false;
};

// The trainer holds every ring slot through live batches, so the next batch
// can never be produced. Raised instead of deadlocking. Maps to RuntimeError.
class RINGLOADER_EXPORT LeaseError : public Error {
 public:
  using Error::Error;
};

// The node loader an AttachedLoader reads from is gone (died, stopped,
// failed), or refused the attach (no such node, lane out of range or taken).
// Maps to Python's ConnectionError.
class RINGLOADER_EXPORT NodeError : public Error {
 public:
  using Error::Error;
};

// Where a sample came from, for error messages: "sample 17 (/data/cat/3.jpg)".
RINGLOADER_EXPORT std::string describe_sample(int64_t index, const std::string& source);

}  // namespace ringloader
