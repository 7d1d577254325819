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
// (data, target, epoch, index, sample_indices), as NativeLoader.next gives.
py::object batch_tuple(const Batch& batch);
Dataset dataset_from_json(const std::string& text);
Pipeline pipeline_from_json(const std::string& text);
LoaderOptions options_from_dict(const py::dict& values);
py::dict stats_dict(const LoaderStats& stats);

// NodeLoader and AttachedLoader (node.cc).
void register_node(py::module_& module);

}  // namespace ringloader::python
