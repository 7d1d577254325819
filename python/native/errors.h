// SPDX-License-Identifier: BSD-3-Clause
// C++ errors become Python exceptions of the natural type, each also a
// ringloader.Error (itself an Exception), so `except ringloader.Error`
// catches them all:
//   OptionError -> ringloader.OptionError(Error, ValueError)
//   IoError     -> ringloader.DataIOError(Error, OSError)
//   DecodeError -> ringloader.DecodeError(Error, ValueError)
//   WorkerError -> ringloader.WorkerError(Error, RuntimeError)
//   LeaseError  -> ringloader.LeaseError(Error, RuntimeError)
//   Error       -> ringloader.Error(Exception)
// Messages carry exactly one "ringloader: " prefix (nested ones are removed).
#pragma once

#include <pybind11/pybind11.h>

namespace ringloader::python {

void register_errors(pybind11::module_& module);

}  // namespace ringloader::python
