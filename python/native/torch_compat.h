// SPDX-License-Identifier: BSD-3-Clause
// The torch internals the extension uses, per torch version. Batches cross
// as torch's own Python tensors (THPVariable_Wrap) sharing the C++
// StorageImpl, which no public API offers; this file is the one place that
// knows how each supported torch spells that.
#pragma once

#include <pybind11/pybind11.h>
#include <torch/torch.h>

namespace ringloader::python {

namespace py = pybind11;

// A torch.Tensor sharing `tensor`'s TensorImpl and StorageImpl.
py::object wrap_tensor(const torch::Tensor& tensor);

// True when `object` is a torch.Tensor; `unwrap_tensor` then gives its
// C++ tensor (same TensorImpl).
bool is_tensor(py::handle object);
torch::Tensor unwrap_tensor(py::handle object);

// Raises ImportError naming both versions unless the torch Python imported
// is the one this extension was compiled against (the package checks the
// same before loading the extension; this covers a direct import).
void check_torch_version();

}  // namespace ringloader::python
