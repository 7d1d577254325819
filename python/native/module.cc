// SPDX-License-Identifier: BSD-3-Clause
// _ringloader: the public C++ API, seen from Python. Batches cross as torch's
// own Python tensors wrapping the C++ tensors (THPVariable_Wrap): Python gets
// a torch.Tensor aliasing the slot (no copy) that shares the C++ StorageImpl,
// so the slot returns to the workers when Python drops the last tensor, and
// a spill (which swaps that StorageImpl's data pointer) moves the Python
// tensors and their views too. (DLPack would make a second StorageImpl that
// a spill could not reach.)
#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <ATen/DLConvertor.h>
#include <torch/torch.h>

#include "errors.h"
#include "module_parts.h"
#include "ringloader/option_specs.h"
#include "torch_compat.h"
#include "ringloader/ringloader.h"

namespace py = pybind11;

namespace ringloader::python {

// Shared with node.cc (declared in module_parts.h); the extension's symbols
// are hidden, so these names stay inside it.

py::capsule to_capsule(const torch::Tensor& tensor) {
  DLManagedTensor* managed = at::toDLPack(tensor);
  return py::capsule(managed, "dltensor", [](PyObject* capsule) {
    // Only a capsule nobody consumed still owns the tensor.
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* owned = static_cast<DLManagedTensor*>(
          PyCapsule_GetPointer(capsule, "dltensor"));
      if (owned && owned->deleter) owned->deleter(owned);
    }
  });
}

// A torch.Tensor sharing `tensor`'s TensorImpl and StorageImpl.
py::object to_python(const torch::Tensor& tensor) { return wrap_tensor(tensor); }

Dataset dataset_from_json(const std::string& text) {
  return Dataset::from_json(nlohmann::json::parse(text));
}

Pipeline pipeline_from_json(const std::string& text) {
  return Pipeline::from_json(nlohmann::json::parse(text));
}

// A Python keyword value as JSON for the option table, which checks its
// type (set_loader_option). bool before int: True is an int to Python.
nlohmann::json option_value(const std::string& key, py::handle value) {
  if (value.is_none()) return nullptr;
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True;
  if (PyLong_Check(value.ptr()) || PyIndex_Check(value.ptr())) {
    py::int_ number = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
    if (!number) throw py::error_already_set();
    if (PyObject_RichCompareBool(number.ptr(), py::int_(0).ptr(), Py_LT) == 1) {
      long long out = PyLong_AsLongLong(number.ptr());
      if (out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        throw OptionError("ringloader: loader option '" + key + "' is out of range: " +
                          std::string(py::str(value)));
      }
      return static_cast<int64_t>(out);
    }
    unsigned long long out = PyLong_AsUnsignedLongLong(number.ptr());
    if (out == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
      PyErr_Clear();
      throw OptionError("ringloader: loader option '" + key + "' is out of range: " +
                        std::string(py::str(value)));
    }
    return static_cast<uint64_t>(out);
  }
  // float and numpy's floats (np.float32 is no float subclass).
  const PyNumberMethods* number = Py_TYPE(value.ptr())->tp_as_number;
  if (PyFloat_Check(value.ptr()) || (number && number->nb_float)) return value.cast<double>();
  if (PyUnicode_Check(value.ptr())) return value.cast<std::string>();
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    nlohmann::json out = nlohmann::json::array();
    for (py::handle item : value) out.push_back(option_value(key, item));
    return out;
  }
  throw OptionError("ringloader: loader option '" + key + "' cannot be a " +
                    Py_TYPE(value.ptr())->tp_name);
}

// Keyword values by option name, through the option table
// (include/ringloader/option_specs.h): unknown names and wrong types raise
// OptionError naming the option.
LoaderOptions options_from_dict(const py::dict& values) {
  LoaderOptions options;
  for (auto item : values) {
    const std::string key = py::str(item.first);
    set_loader_option(options, key, option_value(key, item.second));
  }
  return options;
}

py::dict stats_dict(const LoaderStats& stats) {
  py::dict out;
  out["batches"] = stats.batches;
  out["samples"] = stats.samples;
  out["wall_s"] = stats.wall_s;
  out["read_s"] = stats.read_s;
  out["decode_s"] = stats.decode_s;
  out["transform_s"] = stats.transform_s;
  out["slot_wait_s"] = stats.slot_wait_s;
  out["trainer_wait_s"] = stats.trainer_wait_s;
  out["workers"] = stats.workers;
  out["ring_slots"] = stats.ring_slots;
  out["ring_bytes"] = stats.ring_bytes;
  out["ring_resident_bytes"] = stats.ring_resident_bytes;
  out["skipped_samples"] = stats.skipped_samples;
  out["worker_restarts"] = stats.worker_restarts;
  out["redone_batches"] = stats.redone_batches;
  out["spilled_batches"] = stats.spilled_batches;
  out["ring_pinned"] = stats.ring_pinned;
  out["device_batches"] = stats.device_batches;
  out["shard_fetches"] = stats.shard_fetches;
  out["shard_bytes_fetched"] = stats.shard_bytes_fetched;
  out["autotune_decisions"] = stats.autotune_decisions;
  return out;
}

// Loader states cross as dicts of plain values (JSON's), ready for
// torch.save; the order stays a list here and becomes a tensor in Python.
py::object json_module() { return py::module_::import("json"); }

py::dict state_to_dict(const LoaderState& state) {
  return json_module().attr("loads")(state.to_json().dump());
}

LoaderState state_from_dict(const py::dict& state) {
  std::string text = py::str(json_module().attr("dumps")(state));
  try {
    return LoaderState::from_json(nlohmann::json::parse(text));
  } catch (const nlohmann::json::exception& e) {
    throw OptionError(std::string("ringloader: unreadable loader state: ") + e.what());
  }
}

std::vector<LoaderState> states_from_list(const py::list& states) {
  std::vector<LoaderState> out;
  for (const auto& state : states) out.push_back(state_from_dict(state.cast<py::dict>()));
  return out;
}

// [size, choose, shards] per part, as Python passes a mix.
std::vector<MixPart> mix_parts(const std::vector<std::vector<int64_t>>& mix) {
  std::vector<MixPart> parts;
  for (const auto& part : mix) {
    if (part.size() != 3) throw OptionError("ringloader: a mix part is [size, choose, shards]");
    parts.push_back({part[0], part[1], part[2]});
  }
  return parts;
}

// _ringloader.Batch: a named tuple (data, target, epoch, index,
// sample_indices), so Python reads batches by name. Made once at import and
// never freed: it must outlive every batch, also at interpreter exit.
py::object* batch_type = nullptr;

py::object batch_tuple(const Batch& batch) {
  return (*batch_type)(to_python(batch.data), to_python(batch.target), batch.epoch,
                       batch.index, batch.sample_indices);
}

// A Batch named tuple (batch_tuple's) back into the Batch it was made from.
Batch batch_from_tuple(const py::tuple& raw) {
  if (raw.size() != 5 || !is_tensor(raw[0]) || !is_tensor(raw[1])) {
    throw OptionError("ringloader: put_back takes a batch tuple from next()");
  }
  Batch batch;
  batch.data = unwrap_tensor(raw[0]);
  batch.target = unwrap_tensor(raw[1]);
  batch.epoch = raw[2].cast<int64_t>();
  batch.index = raw[3].cast<int64_t>();
  batch.sample_indices = raw[4].cast<std::vector<int64_t>>();
  return batch;
}

PYBIND11_MODULE(_ringloader, module) {
  module.doc() = "ringloader native core (use the ringloader package)";
  // THPVariable_Wrap needs torch's Python types registered (importing it),
  // and the very torch this was compiled against.
  check_torch_version();
  register_errors(module);
  batch_type = new py::object(py::module_::import("collections").attr("namedtuple")(
      "Batch", py::make_tuple("data", "target", "epoch", "index", "sample_indices"),
      py::arg("module") = "ringloader._ringloader"));
  module.attr("Batch") = *batch_type;
  register_node(module);
  register_datasets(module);

  module.def("tar_shards", [](const std::vector<std::string>& urls,
                              int64_t shuffle_buffer, const std::string& mode,
                              const std::string& cache_dir, uint64_t cache_limit_bytes,
                              int prefetch_shards, bool cache_local, int fetch_attempts,
                              const std::string& index, int index_streams,
                              bool index_in_background, bool private_cache) {
    TarShardOptions options;
    options.private_cache = private_cache;
    options.index = index;
    options.index_streams = index_streams;
    options.index_in_background = index_in_background;
    options.shuffle_buffer = shuffle_buffer;
    options.mode = mode == "L" ? ColorMode::kGray : ColorMode::kRGB;
    options.cache_dir = cache_dir;
    options.cache_limit_bytes = cache_limit_bytes;
    options.prefetch_shards = prefetch_shards;
    options.cache_local = cache_local;
    options.fetch_attempts = fetch_attempts;
    // A handle, like file datasets': it owns the sample table's memfd
    // that its description names.
    py::gil_scoped_release release;  // pipe: shards stream while indexing
    return Dataset::tar_shards(urls, options);
  }, py::arg("urls"), py::arg("shuffle_buffer") = TarShardOptions{}.shuffle_buffer,
     py::arg("mode") = "RGB",
     py::arg("cache_dir") = "", py::arg("cache_limit_bytes") = TarShardOptions{}.cache_limit_bytes,
     py::arg("prefetch_shards") = TarShardOptions{}.prefetch_shards,
     py::arg("cache_local") = TarShardOptions{}.cache_local,
     py::arg("fetch_attempts") = TarShardOptions{}.fetch_attempts,
     py::arg("index") = "", py::arg("index_streams") = TarShardOptions{}.index_streams,
     py::arg("index_in_background") = TarShardOptions{}.index_in_background,
     py::arg("private_cache") = TarShardOptions{}.private_cache);
  // TarShardOptions' defaults, declared once in dataset.h: TarShards'
  // keyword defaults are read from here (datasets.py).
  module.def("tar_shard_defaults", [] {
    const TarShardOptions defaults;
    py::dict out;
    out["shuffle_buffer"] = defaults.shuffle_buffer;
    out["cache_limit_bytes"] = defaults.cache_limit_bytes;
    out["prefetch_shards"] = defaults.prefetch_shards;
    out["cache_local"] = defaults.cache_local;
    out["fetch_attempts"] = defaults.fetch_attempts;
    out["index_in_background"] = defaults.index_in_background;
    out["index_streams"] = defaults.index_streams;
    out["private_cache"] = defaults.private_cache;
    return out;
  });
  module.def("idx_dataset", [](const std::string& images, const std::string& labels) {
    return Dataset::idx(images, labels).to_json().dump();
  });
  // The op spec table (transforms/op_specs.cc) as JSON: Python's transform
  // classes take their defaults and allowed values from it.
  module.def("op_specs", [] { return ringloader::op_specs_json().dump(); });
  // The loader option table (loader/trainer/option_specs.cc) as JSON:
  // DataLoader and NodeLoader take their defaults from it.
  module.def("loader_option_specs", [] { return loader_option_specs_json().dump(); });
  // The C++ Loader's automatic ring_slots, so that a loader of Python
  // datasets sizes its ring by the same rule (_python_workers.py).
  module.def("automatic_ring_slots", [](const py::dict& options, uint64_t slot_bytes) {
    return automatic_ring_slots(options_from_dict(options), slot_bytes);
  });
  // The bound on a worker's start, which a Python loader's server probe
  // shares (_python_workers.py).
  module.def("worker_start_timeout_s", &worker_start_timeout_s);
  // Where libringloader.so lies: its helper executables lie beside it
  // (ringloader-python-stub, _python_workers.py).
  module.def("library_folder", [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&worker_start_timeout_s), &info) == 0 ||
        info.dli_fname == nullptr) {
      throw Error("ringloader: cannot tell where libringloader is (dladdr)");
    }
    std::string path = info.dli_fname;
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
  });
  module.def("validate_pipeline", [](const std::string& pipeline, const std::string& mode,
                                     int height, int width) {
    SampleShape shape = pipeline_from_json(pipeline).output_shape(
        mode == "L" ? ColorMode::kGray : ColorMode::kRGB, height, width);
    return py::make_tuple(shape.channels, shape.height, shape.width,
                          shape.dtype == DType::kFloat32 ? "float32" : "uint8",
                          shape.layout == Layout::kCHW ? "CHW" : "HWC");
  });

  // The draws of an AutoAugment-family op (transforms.h's augment_draws),
  // as JSON text: for checking them against torchvision's.
  module.def("augment_draws", [](const std::string& op_json, int height, int width,
                                 uint64_t seed, uint64_t epoch, uint64_t first_index,
                                 uint64_t count) {
    nlohmann::json entry = nlohmann::json::parse(op_json);
    Op op{entry.at("op").get<std::string>(), entry};
    op.params.erase("op");
    return augment_draws(op, height, width, seed, epoch, first_index, count).dump();
  }, py::arg("op_json"), py::arg("height"), py::arg("width"), py::arg("seed") = 0,
     py::arg("epoch") = 0, py::arg("first_index") = 0, py::arg("count") = 1);

  module.def("apply_pipeline", [](const std::string& pipeline, py::bytes encoded,
                                  const std::string& mode, uint64_t seed, uint64_t epoch,
                                  uint64_t index) {
    std::string data = encoded;
    TransformedSample sample = apply_pipeline(
        pipeline_from_json(pipeline), std::vector<uint8_t>(data.begin(), data.end()),
        mode == "L" ? ColorMode::kGray : ColorMode::kRGB, seed, epoch, index);
    const SampleShape& shape = sample.shape;
    std::vector<int64_t> sizes = shape.layout == Layout::kCHW
        ? std::vector<int64_t>{shape.channels, shape.height, shape.width}
        : std::vector<int64_t>{shape.height, shape.width, shape.channels};
    auto dtype = shape.dtype == DType::kFloat32 ? torch::kFloat32 : torch::kUInt8;
    torch::Tensor tensor =
        torch::from_blob(sample.bytes.data(), sizes, torch::TensorOptions().dtype(dtype))
            .clone();
    return to_capsule(tensor);
  }, py::arg("pipeline_json"), py::arg("encoded"), py::arg("mode") = "RGB",
     py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("index") = 0);

  module.def("epoch_order", [](int64_t dataset_size, const py::dict& options,
                                int64_t epoch, const std::vector<std::vector<int64_t>>& mix,
                                const py::list& history) {
    std::vector<ElasticStage> stages;
    for (const auto& stage : history) {
      stages.push_back({stage["world_size"].cast<int64_t>(),
                        stage["batches"].cast<std::vector<int64_t>>()});
    }
    return epoch_order(dataset_size, options_from_dict(options), epoch, mix_parts(mix),
                       stages);
  }, py::arg("dataset_size"), py::arg("options"), py::arg("epoch"),
     py::arg("mix") = std::vector<std::vector<int64_t>>{}, py::arg("history") = py::list());

  // Mixes: per-part counts (the C++ rule, so every face agrees) and a
  // native mix's description.
  module.def("mix_choose", &mix_counts, py::arg("sizes"),
             py::arg("weights"), py::arg("epoch_size"));
  // A Python dataset's slot is virtually large: its raw batch's storage is
  // cut to the bytes the batch uses, so a spill copies those (held_batches.cc).
  module.def("trim_storage", [](py::handle tensor, uint64_t nbytes) {
    if (!is_tensor(tensor)) throw OptionError("ringloader: trim_storage takes a tensor");
    c10::StorageImpl* storage = unwrap_tensor(tensor).storage().unsafeGetStorageImpl();
    if (nbytes > storage->nbytes()) {
      throw OptionError("ringloader: trim_storage: " + std::to_string(nbytes) +
                        " bytes is more than the storage's " +
                        std::to_string(storage->nbytes()));
    }
    storage->set_nbytes(static_cast<size_t>(nbytes));
  }, py::arg("tensor"), py::arg("nbytes"));
  module.def("merge_states", [](const py::list& states) {
    return state_to_dict(LoaderState::merge(states_from_list(states)));
  }, py::arg("states"));

  py::class_<WorkerEndpoint::Task>(module, "WorkerTask")
      .def_readonly("batch_id", &WorkerEndpoint::Task::batch_id)
      .def_readonly("epoch", &WorkerEndpoint::Task::epoch)
      .def_readonly("index", &WorkerEndpoint::Task::index)
      .def_readonly("samples", &WorkerEndpoint::Task::samples);

  py::class_<WorkerEndpoint>(module, "WorkerEndpoint")
      .def(py::init<int, int, int>(), py::arg("ring_fd"), py::arg("worker_index"),
           py::arg("parent_pid"))
      .def("next_task", [](WorkerEndpoint& endpoint) {
        py::gil_scoped_release release;
        return endpoint.next_task();
      })
      .def("slot", [](WorkerEndpoint& endpoint, const WorkerEndpoint::Task& task) {
        // A writable view of the slot: the worker writes samples in place.
        return py::memoryview::from_memory(endpoint.slot_data(task),
                                           static_cast<ssize_t>(endpoint.slot_bytes()),
                                           /*readonly=*/false);
      }, py::keep_alive<0, 1>())
      .def("deal_round_robin", &WorkerEndpoint::deal_round_robin, py::arg("worker_count"))
      .def("publish", &WorkerEndpoint::publish)
      .def("fail", &WorkerEndpoint::fail)
      .def("heartbeat", &WorkerEndpoint::heartbeat, py::arg("sample") = -1)
      .def("add_times", &WorkerEndpoint::add_times);

  py::class_<Loader>(module, "NativeLoader")
      .def_static("external", [](std::vector<std::string> command, py::bytes config,
                                 int64_t dataset_size, uint64_t sample_bytes,
                                 const py::dict& options,
                                 const std::vector<std::vector<int64_t>>& mix) {
        ExternalWorkers workers{std::move(command), std::string(config), dataset_size,
                                sample_bytes, mix_parts(mix)};
        auto parsed = options_from_dict(options);
        py::gil_scoped_release release;
        return std::make_unique<Loader>(std::move(workers), parsed);
      }, py::arg("command"), py::arg("config"), py::arg("dataset_size"),
         py::arg("sample_bytes"), py::arg("options"),
         py::arg("mix") = std::vector<std::vector<int64_t>>{})
      .def(py::init([](const std::string& dataset, const std::string& pipeline,
                       const py::dict& options) {
             auto parsed = options_from_dict(options);
             auto data = dataset_from_json(dataset);
             auto ops = pipeline_from_json(pipeline);
             py::gil_scoped_release release;
             return std::make_unique<Loader>(std::move(data), std::move(ops), parsed);
           }),
           py::arg("dataset_json"), py::arg("pipeline_json"), py::arg("options"))
      // The dataset itself, not its description: tar shards still being
      // indexed in the background have no description yet (it would wait).
      .def(py::init([](const Dataset& dataset, const std::string& pipeline,
                       const py::dict& options) {
             auto parsed = options_from_dict(options);
             auto ops = pipeline_from_json(pipeline);
             py::gil_scoped_release release;
             return std::make_unique<Loader>(dataset, std::move(ops), parsed);
           }),
           py::arg("dataset"), py::arg("pipeline_json"), py::arg("options"))
      .def("set_epoch", &Loader::set_epoch)
      .def("set_order", &Loader::set_order)
      .def("start_epoch", [](Loader& loader) {
        // begin() yields the first batch into an iterator we do not keep:
        // start the epoch through next() instead.
        py::gil_scoped_release release;
        loader.begin_epoch();
      })
      .def("next", &next_batch_or_none<Loader>)
      .def("put_back", [](Loader& loader, const py::tuple& raw) {
        loader.put_back(batch_from_tuple(raw));
      }, py::arg("batch"))
      .def("batches_handed_out", &Loader::batches_handed_out)
      .def("state_dict", [](const Loader& loader) { return state_to_dict(loader.state_dict()); })
      .def("load_state_dict", [](Loader& loader, const py::dict& state) {
        loader.load_state_dict(state_from_dict(state));
      })
      .def("__len__", &Loader::size)
      .def("stats", [](const Loader& loader) { return stats_dict(loader.stats()); })
      .def("stats_text", [](const Loader& loader) { return loader.stats().to_string(); })
      .def("worker_pids", &Loader::worker_pids);
}

}  // namespace ringloader::python
