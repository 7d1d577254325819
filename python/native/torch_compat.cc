// SPDX-License-Identifier: BSD-3-Clause
#include "torch_compat.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/version.h>

#include <string>

#ifndef RINGLOADER_BUILT_TORCH_VERSION
#error "python/native/torch_compat.cmake defines the torch version built against"
#endif

namespace ringloader::python {

// torch 1.13 declares THPVariable_Wrap(at::TensorBase) (by value); 2.x adds
// const& and && overloads. A const Tensor& converts to each, and every one
// returns a new reference or null with a Python error set.
static_assert(TORCH_VERSION_MAJOR == 1 ? TORCH_VERSION_MINOR >= 13 : TORCH_VERSION_MAJOR == 2,
              "ringloader supports torch 1.13 and 2.x (python/native/torch_compat.cc)");

py::object wrap_tensor(const torch::Tensor& tensor) {
  PyObject* wrapped = THPVariable_Wrap(tensor);
  if (!wrapped) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(wrapped);
}

bool is_tensor(py::handle object) { return THPVariable_Check(object.ptr()); }

// THPVariable_Unpack gives a const Tensor& in both lines (1.13 and 2.x).
torch::Tensor unwrap_tensor(py::handle object) { return THPVariable_Unpack(object.ptr()); }

void check_torch_version() {
  py::module_ torch = py::module_::import("torch");
  std::string running = py::str(torch.attr("__version__"));
  if (running != RINGLOADER_BUILT_TORCH_VERSION) {
    throw py::import_error(
        "ringloader's extension was built against torch " RINGLOADER_BUILT_TORCH_VERSION
        ", but this Python imports torch " + running +
        ". Rebuild ringloader against this torch: pip install --no-build-isolation "
        "--force-reinstall --no-deps --no-cache-dir <ringloader source>");
  }
}

}  // namespace ringloader::python
