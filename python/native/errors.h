// C++ errors become Python exceptions of the natural type:
//   OptionError -> ringloader.OptionError(ValueError)
//   IoError     -> ringloader.DataIOError(OSError)
//   DecodeError -> ringloader.DecodeError(ValueError)
//   WorkerError -> ringloader.WorkerError(RuntimeError)
//   LeaseError  -> ringloader.LeaseError(RuntimeError)
#pragma once

#include <pybind11/pybind11.h>

namespace ringloader::python {

void register_errors(pybind11::module_& module);

}  // namespace ringloader::python
