// SPDX-License-Identifier: BSD-3-Clause
// Native dataset handles for python/ringloader/datasets/. A handle owns
// its Dataset, and so the sample table's memfd that its description names
// (/proc/<pid>/fd/<n>): the description is only valid while the handle
// lives, which is why Python keeps the handle, not the JSON.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "module_parts.h"

namespace ringloader::python {
namespace {

ColorMode mode_of(const std::string& mode) {
  return mode == "L" ? ColorMode::kGray : ColorMode::kRGB;
}

// The labels column as a read-only int64 array over the mapping (no copy);
// the array keeps the table mapped.
py::array labels_view(const Dataset& dataset) {
  const int64_t* labels = dataset.sample_labels();
  if (!labels) throw OptionError("ringloader: not a file-backed or tar dataset");
  auto* owner = new Dataset(dataset);
  py::capsule base(owner, [](void* p) { delete static_cast<Dataset*>(p); });
  py::array_t<int64_t> array({static_cast<py::ssize_t>(dataset.size())},
                             {static_cast<py::ssize_t>(sizeof(int64_t))}, labels, base);
  py::detail::array_proxy(array.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return array;
}

}  // namespace

void register_datasets(py::module_& module) {
  py::class_<Dataset>(module, "DatasetHandle")
      // Both wait for tar shards still being indexed in the background.
      .def("__len__", [](const Dataset& d) {
        py::gil_scoped_release release;
        return d.size();
      })
      .def("json", [](const Dataset& d) {
        py::gil_scoped_release release;
        return d.to_json().dump();
      })
      // Never waits: whether tar shards are still being indexed, and their
      // list (the description a Loader's workers get meanwhile).
      .def("indexing", [](const Dataset& d) { return d.background_index() != nullptr; })
      .def("shard_named_json", [](const Dataset& d) { return d.shard_named_view().to_json().dump(); })
      .def("path", &Dataset::sample_path)
      .def("label", &Dataset::sample_label)
      .def("paths", [](const Dataset& d, int64_t begin, int64_t end) {
        py::list out;
        for (int64_t i = begin; i < end; ++i) out.append(d.sample_path(i));
        return out;
      })
      .def("labels", &labels_view)
      // Tar shards: (shard URL, offset, size, label, member name) of a
      // sample, read from the shared table (checked: IoError when corrupt).
      .def("tar_sample", [](const Dataset& d, int64_t index) {
        const TarMember m = d.tar_member(index);
        return py::make_tuple(m.shard, m.offset, m.size, m.label, m.name);
      })
      // (image bytes, label), read and checked as a worker reads them (a
      // counts-only index's label comes from the shard).
      .def("tar_sample_read", [](const Dataset& d, int64_t index) {
        std::vector<uint8_t> bytes;
        int64_t label = -1;
        {
          py::gil_scoped_release release;
          bytes = d.tar_member_bytes(index, &label);
        }
        return py::make_tuple(
            py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size()), label);
      })
      .def("classes", &Dataset::classes)
      .def("select", [](const Dataset& d, const std::vector<int64_t>& indices) {
        py::gil_scoped_release release;
        return d.select(indices);
      })
      .def_property_readonly("table_bytes", &Dataset::sample_table_bytes);

  module.def("scan_image_folder", [](const std::string& root, const std::string& mode,
                                     const std::vector<std::string>& extensions,
                                     bool all_files) {
    py::gil_scoped_release release;
    return Dataset::image_folder(root, mode_of(mode), extensions, all_files);
  }, py::arg("root"), py::arg("mode") = "RGB",
     py::arg("extensions") = std::vector<std::string>{}, py::arg("all_files") = false);
  module.def("file_list_dataset", [](const std::vector<std::string>& paths,
                                     const std::vector<int64_t>& labels,
                                     const std::string& mode) {
    if (paths.size() != labels.size()) throw OptionError("ringloader: paths and labels differ in length");
    std::vector<FileSample> samples;
    samples.reserve(paths.size());
    for (size_t i = 0; i < paths.size(); ++i) samples.push_back({paths[i], labels[i]});
    return Dataset::file_list(std::move(samples), mode_of(mode));
  }, py::arg("paths"), py::arg("labels"), py::arg("mode") = "RGB");
  // TensorDataset rows (python/ringloader/_native/datasets.py): `rows` is
  // the features' bytes (a C-contiguous uint8 view), checked against the
  // count and row size before the builder reads them.
  module.def("tensor_rows_dataset", [](py::buffer rows, int64_t count,
                                       const std::string& type,
                                       const std::vector<int64_t>& row_shape,
                                       std::optional<py::array_t<int64_t>> labels) {
    py::buffer_info info = rows.request();
    TensorRowsData data;
    data.rows = info.ptr;
    data.row_count = count;
    data.type = element_type_from_name(type);
    data.row_shape = row_shape;
    int64_t row_elements = 1;
    for (int64_t size : row_shape) row_elements *= size;
    if (info.itemsize != 1 || info.ndim != 1 || info.strides[0] != 1 || count < 0 ||
        info.size != count * row_elements * static_cast<int64_t>(element_size(data.type))) {
      throw OptionError("ringloader: tensor rows: the bytes do not hold " +
                        std::to_string(count) + " contiguous rows");
    }
    if (labels) {
      if (labels->ndim() != 1 || labels->size() != count ||
          labels->strides(0) != static_cast<py::ssize_t>(sizeof(int64_t))) {
        throw OptionError("ringloader: tensor rows: labels must be " + std::to_string(count) +
                          " contiguous int64 values");
      }
      data.labels = labels->data();
    }
    py::gil_scoped_release release;
    return Dataset::tensor_rows(data);
  }, py::arg("rows"), py::arg("count"), py::arg("type"), py::arg("row_shape"),
     py::arg("labels") = py::none());
  module.def("dataset_from_json", [](const std::string& text) {
    return dataset_from_json(text);
  });
  module.def("mix_dataset", [](const std::vector<std::pair<std::string, double>>& parts,
                               int64_t epoch_size) {
    std::vector<std::pair<Dataset, double>> datasets;
    for (const auto& [json, weight] : parts) datasets.emplace_back(dataset_from_json(json), weight);
    return Dataset::mix(datasets, MixOptions{epoch_size});
  }, py::arg("parts"), py::arg("epoch_size"));
}

}  // namespace ringloader::python
