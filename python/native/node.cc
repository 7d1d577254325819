// SPDX-License-Identifier: BSD-3-Clause
// _ringloader.NodeLoader / AttachedLoader: the node loader's C++ classes,
// seen from Python (ringloader/node.py wraps them).
#include <pybind11/stl.h>

#include "module_parts.h"

namespace ringloader::python {
namespace {

NodeOptions node_options_from_dict(const py::dict& values) {
  NodeOptions node;
  for (auto item : values) {
    const std::string key = py::str(item.first);
    py::handle value = item.second;
    if (key == "name") node.name = value.cast<std::string>();
    else if (key == "trainers") node.trainers = value.cast<int>();
    else if (key == "lane_slots") node.lane_slots = value.cast<int>();
    else if (key == "device") node.device = value.cast<std::string>();
    else if (key == "devices") node.devices = value.cast<std::vector<int>>();
    else if (key == "first_epoch") node.first_epoch = value.cast<int64_t>();
    else if (key == "epochs") node.epochs = value.cast<int64_t>();
    else if (key == "allow_group") node.allow_group = value.cast<std::string>();
    else if (key == "cuda_release_timeout_s") node.cuda_release_timeout_s = value.cast<double>();
    else throw OptionError("ringloader: unknown node option \"" + key + "\"");
  }
  return node;
}

py::dict node_stats_dict(const NodeStats& stats) {
  py::dict out;
  out["batches"] = stats.batches;
  out["lane_batches"] = stats.lane_batches;
  out["attaches"] = stats.attaches;
  out["detaches"] = stats.detaches;
  out["reclaimed_slots"] = stats.reclaimed_slots;
  out["violations"] = stats.violations;
  out["dropped_batches"] = stats.dropped_batches;
  out["lane_wait_s"] = stats.lane_wait_s;
  out["loader"] = stats_dict(stats.loader);
  return out;
}

}  // namespace

void register_node(py::module_& module) {
  py::class_<NodeLoader>(module, "NodeLoader")
      .def(py::init([](const std::string& dataset, const std::string& pipeline,
                       const py::dict& options, const py::dict& node) {
             auto parsed = options_from_dict(options);
             auto node_options = node_options_from_dict(node);
             auto data = dataset_from_json(dataset);
             auto ops = pipeline_from_json(pipeline);
             py::gil_scoped_release release;
             return std::make_unique<NodeLoader>(std::move(data), std::move(ops), parsed,
                                                 std::move(node_options));
           }),
           py::arg("dataset_json"), py::arg("pipeline_json"), py::arg("options"),
           py::arg("node"))
      .def("serve", &NodeLoader::serve, py::call_guard<py::gil_scoped_release>())
      .def("start", &NodeLoader::start)
      .def("stop", &NodeLoader::stop)
      .def("serving", &NodeLoader::serving)
      .def("join", &NodeLoader::join, py::call_guard<py::gil_scoped_release>())
      .def("batches_per_trainer", &NodeLoader::batches_per_trainer)
      .def("stats", [](const NodeLoader& node) { return node_stats_dict(node.stats()); })
      .def("stats_text", [](const NodeLoader& node) { return node.stats().to_string(); })
      .def("trainer_pids", &NodeLoader::trainer_pids);

  py::class_<AttachedLoader>(module, "AttachedLoader")
      .def(py::init([](const std::string& name, int trainer, double connect_timeout_s,
                       double poll_interval_s, int64_t node_uid) {
             AttachOptions options;
             options.trainer = trainer;
             options.connect_timeout_s = connect_timeout_s;
             options.poll_interval_s = poll_interval_s;
             options.node_uid = node_uid;
             py::gil_scoped_release release;
             return std::make_unique<AttachedLoader>(name, options);
           }),
           py::arg("name"), py::arg("trainer") = -1, py::arg("connect_timeout_s") = 60.0,
           py::arg("poll_interval_s") = 0.1, py::arg("node_uid") = -1)
      .def("set_epoch", &AttachedLoader::set_epoch)
      .def("begin_epoch", &AttachedLoader::begin_epoch)
      .def("next", &next_batch_or_none<AttachedLoader>)
      .def("__len__", &AttachedLoader::batches_per_epoch)
      .def_property_readonly("batch_size", &AttachedLoader::batch_size)
      .def_property_readonly("trainer", &AttachedLoader::trainer)
      .def_property_readonly("epoch", &AttachedLoader::epoch)
      .def_property_readonly("device", &AttachedLoader::device);
}

}  // namespace ringloader::python
