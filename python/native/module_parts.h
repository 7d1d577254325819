// SPDX-License-Identifier: BSD-3-Clause
// Conversions the extension's files share (module.cc defines them).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "ringloader/ringloader.h"

namespace ringloader::python {

namespace py = pybind11;

// A torch.Tensor sharing `tensor`'s TensorImpl and StorageImpl.
py::object to_python(const torch::Tensor& tensor);
// _ringloader.Batch(data, target, epoch, index, sample_indices), a named
// tuple, as NativeLoader.next gives.
py::object batch_tuple(const Batch& batch);
Dataset dataset_from_json(const std::string& text);
Pipeline pipeline_from_json(const std::string& text);
LoaderOptions options_from_dict(const py::dict& values);
py::dict stats_dict(const LoaderStats& stats);

// source.next(check) as a Python batch tuple, or None at the epoch's end,
// for a Loader (module.cc) and an attached lane (node.cc) alike.
// Waiting must not hold the GIL: other Python threads (and the garbage
// collector releasing old batches) have to run meanwhile. Between bounded
// waits the GIL is taken back to run signal handlers, so Ctrl-C raises
// KeyboardInterrupt now, not when the batch arrives; the source keeps the
// awaited batch for a later next(). A signal that arrives once the wait's
// last check has run (the batch is being taken, or the GIL is being taken
// back) would be raised by Python as soon as next() returns, dropping the
// batch with its tuple: it is raised here instead, with the batch put back
// for the next call.
template <typename Source>
py::object next_batch_or_none(Source& source) {
  std::optional<Batch> batch;
  {
    py::gil_scoped_release release;
    batch = source.next([] {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    });
  }
  if (!batch) return py::none();
  if (PyErr_CheckSignals() != 0) {
    py::error_already_set pending;
    try {
      source.put_back(std::move(*batch));
    } catch (const Error&) {
      // The handler started another epoch: this batch was cancelled anyway.
    }
    throw pending;
  }
  return batch_tuple(*batch);
}

// NodeLoader and AttachedLoader (node.cc).
void register_node(py::module_& module);
// DatasetHandle and the functions that make one (datasets.cc).
void register_datasets(py::module_& module);

}  // namespace ringloader::python
