// SPDX-License-Identifier: BSD-3-Clause
// _ringloader.NodeLoader / AttachedLoader: the node loader's C++ classes,
// seen from Python (ringloader/node.py and ringloader/attached.py wrap them).
#include <pybind11/stl.h>

#include <optional>
#include <utility>

#include "loader/ring/fault_point.h"
#include "module_parts.h"

namespace ringloader::python {
namespace {

// An AttachedLoader with what Ctrl-C needs (issue 31), as Loader has it:
// a batch next() took may be put back (next_of_lane) so that the next call
// returns it again, and it counts what it handed out (ringloader/attached.py
// notices a batch Python dropped by that).
class AttachedLane {
 public:
  AttachedLane(const std::string& name, AttachOptions options) : lane_(name, options) {}

  // A new epoch skips the rest of the last one, a batch put back included.
  void set_epoch(int64_t epoch) {
    put_back_.reset();
    lane_.set_epoch(epoch);
  }
  void begin_epoch() {
    put_back_.reset();
    lane_.begin_epoch();
  }

  std::optional<Batch> next(const std::function<void()>& check) {
    std::optional<Batch> batch;
    if (put_back_) {
      batch = std::move(put_back_);
      put_back_.reset();
    } else {
      batch = lane_.next(check);
    }
    if (!batch) return batch;
    ++handed_out_;
    RINGLOADER_FAULT_POINT("attached.next.handed_out");
    return batch;
  }

  void put_back(Batch batch) {
    if (put_back_ || handed_out_ == 0 || batch.epoch != lane_.epoch()) {
      throw Error("ringloader: put_back() takes back only the batch the last next() "
                  "of this epoch handed out");
    }
    put_back_ = std::move(batch);
    --handed_out_;
  }

  int64_t batches_handed_out() const { return handed_out_; }
  const AttachedLoader& lane() const { return lane_; }

 private:
  AttachedLoader lane_;
  std::optional<Batch> put_back_;  // handed out, then taken back
  int64_t handed_out_ = 0;         // batches next() returned, less those put back
};

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

  py::class_<AttachedLane>(module, "AttachedLoader")
      .def(py::init([](const std::string& name, int trainer, double connect_timeout_s,
                       double poll_interval_s, int64_t node_uid) {
             AttachOptions options;
             options.trainer = trainer;
             options.connect_timeout_s = connect_timeout_s;
             options.poll_interval_s = poll_interval_s;
             options.node_uid = node_uid;
             py::gil_scoped_release release;
             return std::make_unique<AttachedLane>(name, options);
           }),
           py::arg("name"), py::arg("trainer") = -1, py::arg("connect_timeout_s") = 60.0,
           py::arg("poll_interval_s") = 0.1, py::arg("node_uid") = -1)
      .def("set_epoch", &AttachedLane::set_epoch)
      .def("begin_epoch", &AttachedLane::begin_epoch)
      .def("next", &next_batch_or_none<AttachedLane>)
      .def("batches_handed_out", &AttachedLane::batches_handed_out)
      .def("__len__", [](const AttachedLane& lane) { return lane.lane().batches_per_epoch(); })
      .def_property_readonly("batch_size",
                             [](const AttachedLane& lane) { return lane.lane().batch_size(); })
      .def_property_readonly("trainer",
                             [](const AttachedLane& lane) { return lane.lane().trainer(); })
      .def_property_readonly("epoch", [](const AttachedLane& lane) { return lane.lane().epoch(); })
      .def_property_readonly("device",
                             [](const AttachedLane& lane) { return lane.lane().device(); });
}

}  // namespace ringloader::python
