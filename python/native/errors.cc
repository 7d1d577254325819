#include "errors.h"

#include "ringloader/errors.h"

namespace py = pybind11;

namespace ringloader::python {

void register_errors(py::module_& module) {
  static py::exception<OptionError> option_error(module, "OptionError",
                                                 PyExc_ValueError);
  static py::exception<IoError> io_error(module, "DataIOError", PyExc_OSError);
  static py::exception<DecodeError> decode_error(module, "DecodeError",
                                                 PyExc_ValueError);
  static py::exception<WorkerError> worker_error(module, "WorkerError",
                                                 PyExc_RuntimeError);
  static py::exception<LeaseError> lease_error(module, "LeaseError",
                                               PyExc_RuntimeError);
  static py::exception<Error> base_error(module, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const OptionError& error) {
      PyErr_SetString(option_error.ptr(), error.what());
    } catch (const IoError& error) {
      PyErr_SetString(io_error.ptr(), error.what());
    } catch (const DecodeError& error) {
      PyErr_SetString(decode_error.ptr(), error.what());
    } catch (const WorkerError& error) {
      PyErr_SetString(worker_error.ptr(), error.what());
    } catch (const LeaseError& error) {
      PyErr_SetString(lease_error.ptr(), error.what());
    } catch (const Error& error) {
      PyErr_SetString(base_error.ptr(), error.what());
    }
  });
}

}  // namespace ringloader::python
