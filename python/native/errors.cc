// SPDX-License-Identifier: BSD-3-Clause
#include "errors.h"

#include <string>

#include "ringloader/errors.h"

namespace py = pybind11;

namespace ringloader::python {
namespace {

constexpr const char* kPrefix = "ringloader: ";

// Nested errors wrap messages that already carry the prefix ("ringloader:
// batch 8 ...: ringloader: sample 37 ..."); Python sees exactly one, at the
// start.
std::string one_prefix(const std::string& message) {
  const std::string prefix = kPrefix;
  std::string out = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size())
                                                  : message;
  for (size_t at = out.find(prefix); at != std::string::npos; at = out.find(prefix, at)) {
    out.erase(at, prefix.size());
  }
  return prefix + out;
}

// A class with several bases (pybind11's py::exception takes one):
// ringloader.Error first, then the builtin a user would catch.
PyObject* new_error(py::module_& module, const char* name, py::handle bases) {
  std::string qualified = std::string("ringloader.") + name;
  PyObject* type = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  module.add_object(name, py::reinterpret_borrow<py::object>(type));
  return type;
}

// PyErr_NewException borrows the bases; the tuple may go after the call.
py::tuple with_builtin(PyObject* base, PyObject* builtin) {
  return py::make_tuple(py::handle(base), py::handle(builtin));
}

// A WorkerError for a batch a worker reported failed carries which batch
// and worker as attributes (none of it parsed from the text): Python finds
// that worker's exception record by them (_exceptions.from_worker).
void set_worker_error(PyObject* type, const WorkerError& error) {
  const std::string message = one_prefix(error.what());
  const FailedBatch* failed = error.failed_batch();
  if (failed == nullptr) {
    PyErr_SetString(type, message.c_str());
    return;
  }
  try {
    py::object instance = py::reinterpret_borrow<py::object>(type)(message);
    instance.attr("batch_id") = failed->batch_id;
    instance.attr("epoch") = failed->epoch;
    instance.attr("batch_index") = failed->index;
    instance.attr("worker") = failed->worker;
    instance.attr("worker_pid") = failed->worker_pid;
    PyErr_SetObject(type, instance.ptr());
  } catch (py::error_already_set& pending) {
    pending.restore();  // (out of memory): that error is raised instead
  }
}

}  // namespace

void register_errors(py::module_& module) {
  // The classes live as long as the interpreter (module attributes), so the
  // translator may hold their raw pointers.
  static PyObject* base_error = new_error(module, "Error", py::handle(PyExc_Exception));
  static PyObject* option_error =
      new_error(module, "OptionError", with_builtin(base_error, PyExc_ValueError));
  static PyObject* io_error =
      new_error(module, "DataIOError", with_builtin(base_error, PyExc_OSError));
  static PyObject* decode_error =
      new_error(module, "DecodeError", with_builtin(base_error, PyExc_ValueError));
  static PyObject* worker_error =
      new_error(module, "WorkerError", with_builtin(base_error, PyExc_RuntimeError));
  static PyObject* lease_error =
      new_error(module, "LeaseError", with_builtin(base_error, PyExc_RuntimeError));
  static PyObject* node_error =
      new_error(module, "NodeError", with_builtin(base_error, PyExc_ConnectionError));
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const OptionError& error) {
      PyErr_SetString(option_error, one_prefix(error.what()).c_str());
    } catch (const IoError& error) {
      PyErr_SetString(io_error, one_prefix(error.what()).c_str());
    } catch (const DecodeError& error) {
      PyErr_SetString(decode_error, one_prefix(error.what()).c_str());
    } catch (const WorkerError& error) {
      set_worker_error(worker_error, error);
    } catch (const LeaseError& error) {
      PyErr_SetString(lease_error, one_prefix(error.what()).c_str());
    } catch (const NodeError& error) {
      PyErr_SetString(node_error, one_prefix(error.what()).c_str());
    } catch (const Error& error) {
      PyErr_SetString(base_error, one_prefix(error.what()).c_str());
    }
  });
}

}  // namespace ringloader::python
