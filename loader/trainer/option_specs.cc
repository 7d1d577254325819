// SPDX-License-Identifier: BSD-3-Clause
// The loader option table (include/ringloader/option_specs.h). A new option
// is a field with its doc and default in options.h and a row here; the
// binding, Python's defaults and the validation follow from the row.
#include "ringloader/option_specs.h"

#include <functional>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "ringloader/errors.h"

namespace ringloader {
namespace {

using nlohmann::json;
// "" when the options are fine, else the OptionError's text.
using Check = std::function<std::string(const LoaderOptions&)>;

struct OptionSpec {
  std::string name;
  std::string type;
  std::vector<std::string> choices;
  std::string doc;
  std::function<json(const LoaderOptions&)> get;
  std::function<void(LoaderOptions&, const json&)> set;  // throws OptionError
  Check check;
};

[[noreturn]] void refuse(const std::string& name, const std::string& wanted,
                         const json& value) {
  throw OptionError("ringloader: loader option '" + name + "' must be " + wanted +
                    ", got " + value.dump());
}

template <typename T>
std::string type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return "int";
  else if constexpr (std::is_integral_v<T>) return "uint";
  else if constexpr (std::is_same_v<T, double>) return "float";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else return "floats";
}

template <typename T>
T read_integer(const std::string& name, const json& value) {
  const std::string wanted = "an integer in [" +
                             std::to_string(std::numeric_limits<T>::min()) + ", " +
                             std::to_string(std::numeric_limits<T>::max()) + "]";
  if (!value.is_number_integer()) refuse(name, wanted, value);
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) refuse(name, wanted, value);
    return static_cast<T>(v);
  }
  const auto v = value.get<int64_t>();
  if (v < 0 && !std::is_signed_v<T>) refuse(name, wanted, value);
  if constexpr (std::is_signed_v<T>) {
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
      refuse(name, wanted, value);
    }
  }
  return static_cast<T>(v);
}

template <typename T>
T read_as(const std::string& name, const json& value) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) refuse(name, "true or false", value);
    return value.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    return read_integer<T>(name, value);
  } else if constexpr (std::is_same_v<T, double>) {
    if (!value.is_number()) refuse(name, "a number", value);
    return value.get<double>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) refuse(name, "a string", value);
    return value.get<std::string>();
  } else {
    static_assert(std::is_same_v<T, std::vector<double>>);
    if (!value.is_array()) refuse(name, "a list of numbers", value);
    std::vector<double> out;
    for (const json& item : value) {
      if (!item.is_number()) refuse(name, "a list of numbers", value);
      out.push_back(item.get<double>());
    }
    return out;
  }
}

template <typename T>
OptionSpec field(const std::string& name, T LoaderOptions::*member, std::string doc,
                 Check check = {}) {
  OptionSpec spec;
  spec.name = name;
  spec.type = type_name<T>();
  spec.doc = std::move(doc);
  spec.get = [member](const LoaderOptions& options) { return json(options.*member); };
  spec.set = [member, name](LoaderOptions& options, const json& value) {
    options.*member = read_as<T>(name, value);
  };
  spec.check = std::move(check);
  return spec;
}

template <typename E>
OptionSpec choice(const std::string& name, E LoaderOptions::*member,
                  std::vector<std::pair<std::string, E>> values, std::string doc) {
  OptionSpec spec;
  spec.name = name;
  spec.type = "choice";
  spec.doc = std::move(doc);
  std::string wanted;
  for (const auto& [text, unused] : values) {
    spec.choices.push_back(text);
    wanted += (wanted.empty() ? "one of \"" : ", \"") + text + "\"";
  }
  spec.get = [member, values](const LoaderOptions& options) {
    for (const auto& [text, value] : values) {
      if (value == options.*member) return json(text);
    }
    return json();  // a value outside the enum: only a cast can make one
  };
  spec.set = [member, values, name, wanted](LoaderOptions& options, const json& value) {
    if (value.is_string()) {
      for (const auto& [text, choice_value] : values) {
        if (text == value.get<std::string>()) {
          options.*member = choice_value;
          return;
        }
      }
    }
    refuse(name, wanted, value);
  };
  return spec;
}

// A check: `holds(options)`, else OptionError(message).
template <typename Holds>
Check require(Holds holds, std::string message) {
  return [holds, message](const LoaderOptions& options) {
    return holds(options) ? std::string() : message;
  };
}

std::vector<OptionSpec> make_specs() {
  using O = LoaderOptions;
  std::vector<OptionSpec> specs;
  specs.push_back(field("batch_size", &O::batch_size, "samples per batch",
      [](const O& o) -> std::string {
        if (o.batch_size <= 0) {
          return "ringloader: batch_size must be positive, got " + std::to_string(o.batch_size);
        }
        if (o.batch_size > (1 << 24)) {
          return "ringloader: batch_size " + std::to_string(o.batch_size) + " is too large";
        }
        return {};
      }));
  specs.push_back(field("num_workers", &O::num_workers,
      "worker processes; 0: in the trainer; -1 (kAutoWorkers): chosen by measurement",
      [](const O& o) -> std::string {
        if (o.num_workers >= 0 || o.num_workers == LoaderOptions::kAutoWorkers) return {};
        return "ringloader: num_workers must be >= 0 or kAutoWorkers, got " +
               std::to_string(o.num_workers);
      }));
  specs.push_back(field("max_auto_workers", &O::max_auto_workers,
      "most workers kAutoWorkers may reach; 0: the online cores",
      require([](const O& o) { return o.max_auto_workers >= 0; },
              "ringloader: max_auto_workers must be >= 0 (0: the cores)")));
  specs.push_back(field("ring_slots", &O::ring_slots,
      "batches in the ring; 0: sized from the workers and the memory budget",
      [](const O& o) -> std::string {
        if (o.ring_slots == 0 || o.ring_slots >= 2) return {};
        return "ringloader: ring_slots must be 0 (automatic) or >= 2, got " +
               std::to_string(o.ring_slots);
      }));
  specs.push_back(field("ring_memory_budget_bytes", &O::ring_memory_budget_bytes,
      "slot bytes an automatic ring may use; 0: a quarter of physical memory"));
  specs.push_back(field("shuffle", &O::shuffle, "a new permutation each epoch"));
  specs.push_back(field("drop_last", &O::drop_last, "drop the last, short batch"));
  specs.push_back(choice("held_batches", &O::held_batches,
      {{"spill", HeldBatches::kSpill}, {"raise", HeldBatches::kRaise}},
      "a kept batch whose slot is needed: copied out of the ring, or LeaseError"));
  specs.push_back(field("seed", &O::seed, "seeds the shuffle and every sample's augmentation"));
  specs.push_back(field("intra_op_threads", &O::intra_op_threads,
      "threads decoding one batch; 0: all cores without workers, else 1",
      require([](const O& o) { return o.intra_op_threads >= 0; },
              "ringloader: intra_op_threads must be >= 0")));
  specs.push_back(field("worker_nice", &O::worker_nice,
      "added to each worker's nice value; 0: the trainer's, as torch's workers",
      require([](const O& o) { return o.worker_nice >= 0 && o.worker_nice <= 19; },
              "ringloader: worker_nice must be in [0, 19]")));
  specs.push_back(field("max_image_pixels", &O::max_image_pixels,
      "images with more pixels are refused before decoding",
      require([](const O& o) { return o.max_image_pixels > 0; },
              "ringloader: max_image_pixels must be positive")));
  specs.push_back(field("worker_executable", &O::worker_executable,
      "the ringloader-worker to spawn; empty: next to the library, or $RINGLOADER_WORKER"));
  specs.push_back(field("poll_interval_s", &O::poll_interval_s,
      "seconds between two checks of the workers while waiting for a batch",
      require([](const O& o) { return o.poll_interval_s > 0; },
              "ringloader: poll_interval_s must be positive")));
  specs.push_back(field("timeout_s", &O::timeout_s,
      "> 0: WorkerError after waiting this long for one batch; 0: no limit",
      require([](const O& o) { return o.timeout_s >= 0; },
              "ringloader: timeout_s must be >= 0")));
  specs.push_back(field("hang_timeout_s", &O::hang_timeout_s,
      "seconds on one sample after which a worker is hung and replaced; 0: never",
      require([](const O& o) { return o.hang_timeout_s >= 0; },
              "ringloader: hang_timeout_s must be >= 0 (0 disables)")));
  specs.push_back(field("max_batch_retries", &O::max_batch_retries,
      "times a batch is re-done after its worker was lost before it is given up",
      require([](const O& o) { return o.max_batch_retries >= 0; },
              "ringloader: max_batch_retries must be >= 0")));
  specs.push_back(choice("on_error", &O::on_error,
      {{"raise", OnError::kRaise}, {"skip", OnError::kSkip}},
      "a bad sample: its batch raises, or it is replaced by a deterministic substitute"));
  specs.push_back(field("max_samples_per_epoch", &O::max_samples_per_epoch,
      "most samples set_order() may list; 0: the dataset size",
      require([](const O& o) { return o.max_samples_per_epoch >= 0; },
              "ringloader: max_samples_per_epoch must be >= 0")));
  specs.push_back(field("rank", &O::rank, "this process's rank; -1: $RANK, else 0"));
  specs.push_back(field("world_size", &O::world_size,
      "ranks in the job; -1: $WORLD_SIZE, else 1"));
  specs.push_back(field("device", &O::device, "\"cpu\", \"cuda\" or \"cuda:N\""));
  specs.push_back(field("device_slots", &O::device_slots,
      "batches staged on the GPU ahead of the trainer"));
  specs.push_back(field("pin_memory", &O::pin_memory,
      "page-lock the ring; releases then wait for CUDA work"));
  specs.push_back(field("device_normalize_mean", &O::device_normalize_mean,
      "per-channel mean of the GPU's uint8 finishing; empty: none"));
  specs.push_back(field("device_normalize_std", &O::device_normalize_std,
      "per-channel std of the GPU's uint8 finishing; empty: none"));
  return specs;
}

const std::vector<OptionSpec>& specs() {
  static const std::vector<OptionSpec> table = make_specs();
  return table;
}

const OptionSpec* find_spec(const std::string& name) {
  for (const OptionSpec& spec : specs()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

}  // namespace

nlohmann::json loader_option_specs_json() {
  const LoaderOptions defaults;
  json out = json::array();
  for (const OptionSpec& spec : specs()) {
    out.push_back({{"name", spec.name}, {"type", spec.type},
                   {"default", spec.get(defaults)}, {"choices", spec.choices},
                   {"doc", spec.doc}});
  }
  return out;
}

void set_loader_option(LoaderOptions& options, const std::string& name,
                       const nlohmann::json& value) {
  const OptionSpec* spec = find_spec(name);
  if (!spec) throw OptionError("ringloader: unknown loader option '" + name + "'");
  spec->set(options, value);
}

LoaderOptions loader_options_from_json(const nlohmann::json& values) {
  if (!values.is_object()) {
    throw OptionError("ringloader: loader options must be a JSON object, got " +
                      values.dump());
  }
  LoaderOptions options;
  for (const auto& [name, value] : values.items()) set_loader_option(options, name, value);
  return options;
}

nlohmann::json loader_options_to_json(const LoaderOptions& options) {
  json out = json::object();
  for (const OptionSpec& spec : specs()) out[spec.name] = spec.get(options);
  return out;
}

void validate_loader_options(const LoaderOptions& options) {
  for (const OptionSpec& spec : specs()) {
    if (!spec.check) continue;
    const std::string problem = spec.check(options);
    if (!problem.empty()) throw OptionError(problem);
  }
}

}  // namespace ringloader
