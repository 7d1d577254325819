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

// A worker process failed (died, hung) or reported an error while producing
// a batch. The message names the worker, the batch and, when known, the
// sample and file. Maps to Python's RuntimeError.
class RINGLOADER_EXPORT WorkerError : public Error {
 public:
  using Error::Error;
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
