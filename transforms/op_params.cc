// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/op_params.h"

namespace ringloader::transforms {
namespace {

std::string list(const std::set<size_t>& counts) {
  std::string out;
  for (size_t n : counts) out += (out.empty() ? "" : " or ") + std::to_string(n);
  return out;
}

}  // namespace

void OpParams::fail(const std::string& key, const std::string& why) const {
  throw OptionError("ringloader: pipeline op " + std::to_string(position_) + " (" +
                    op_.name + "): parameter '" + key + "' " + why);
}

bool OpParams::has(const std::string& key) const {
  return op_.params.is_object() && op_.params.contains(key) && !op_.params[key].is_null();
}

const nlohmann::json* OpParams::find(const std::string& key) {
  read_.insert(key);
  if (!has(key)) return nullptr;
  return &op_.params.at(key);
}

std::string OpParams::text(const std::string& key) {
  const nlohmann::json* value = find(key);
  if (!value) fail(key, "is required");
  if (!value->is_string() || value->get<std::string>().empty()) {
    fail(key, "must be a non-empty string, got " + value->dump());
  }
  return value->get<std::string>();
}

nlohmann::json OpParams::rest() {
  nlohmann::json out = nlohmann::json::object();
  if (!op_.params.is_object()) return out;
  for (auto it = op_.params.begin(); it != op_.params.end(); ++it) {
    if (read_.insert(it.key()).second) out[it.key()] = it.value();
  }
  return out;
}

const ParamSpec& OpParams::spec(const std::string& key) const {
  return param_spec(op_.name, key);
}

const nlohmann::json& OpParams::value_or_default(const std::string& key) {
  const ParamSpec& param = spec(key);
  const nlohmann::json* value = find(key);
  if (value) return *value;
  if (param.required) fail(key, "is required");
  return param.default_value;
}

bool OpParams::present(const std::string& key) {
  return find(key) != nullptr;
}

std::vector<int> OpParams::ints(const std::string& key, const std::set<size_t>& counts,
                                bool positive) {
  const nlohmann::json& value = value_or_default(key);
  std::vector<int> out;
  auto take = [&](const nlohmann::json& item) {
    if (!item.is_number_integer()) fail(key, "must hold integers, got " + item.dump());
    int v = item.get<int>();
    if (positive && v <= 0) fail(key, "must be positive, got " + std::to_string(v));
    if (!positive && v < 0) fail(key, "must not be negative, got " + std::to_string(v));
    out.push_back(v);
  };
  if (value.is_array()) {
    for (const auto& item : value) take(item);
  } else if (!value.is_null()) {
    take(value);
  }
  if (!counts.count(out.size())) {
    if (out.empty()) fail(key, "is required");
    fail(key, "must have " + list(counts) + " values, got " + std::to_string(out.size()));
  }
  return out;
}

std::vector<double> OpParams::numbers(const std::string& key, const std::set<size_t>& counts) {
  const nlohmann::json& value = value_or_default(key);
  if (value.is_null()) fail(key, "is required");
  std::vector<double> out;
  auto take = [&](const nlohmann::json& item) {
    if (!item.is_number()) fail(key, "must hold numbers, got " + item.dump());
    out.push_back(item.get<double>());
  };
  if (value.is_array()) {
    for (const auto& item : value) take(item);
  } else {
    take(value);
  }
  if (!counts.empty() && !counts.count(out.size())) {
    fail(key, "must have " + list(counts) + " values, got " + std::to_string(out.size()));
  }
  return out;
}

double OpParams::number(const std::string& key) {
  const ParamSpec& param = spec(key);
  const nlohmann::json& value = value_or_default(key);
  if (value.is_null()) fail(key, "is required");
  if (!value.is_number()) fail(key, "must be a number, got " + value.dump());
  double v = value.get<double>();
  if (!(v >= param.low && v <= param.high)) {
    fail(key, "must be in [" + std::to_string(param.low) + ", " +
                  std::to_string(param.high) + "], got " + std::to_string(v));
  }
  return v;
}

bool OpParams::boolean(const std::string& key) {
  const nlohmann::json& value = value_or_default(key);
  if (!value.is_boolean()) fail(key, "must be true or false, got " + value.dump());
  return value.get<bool>();
}

std::string OpParams::choice(const std::string& key) {
  const ParamSpec& param = spec(key);
  const nlohmann::json& value = value_or_default(key);
  if (!value.is_string()) fail(key, "must be a string, got " + value.dump());
  std::string v = value.get<std::string>();
  const std::set<std::string> allowed(param.choices.begin(), param.choices.end());
  if (!allowed.count(v)) {
    std::string names;
    for (const auto& name : allowed) names += (names.empty() ? "" : ", ") + name;
    fail(key, "is '" + v + "'; expected one of: " + names);
  }
  return v;
}

void OpParams::finish() const {
  if (!op_.params.is_object()) return;
  for (auto it = op_.params.begin(); it != op_.params.end(); ++it) {
    if (read_.count(it.key())) continue;
    std::string names;
    if (spec_) {
      for (const ParamSpec& param : spec_->params) {
        names += (names.empty() ? "" : ", ") + param.name;
      }
    }
    fail(it.key(), "is not a parameter of " + op_.name +
                       (names.empty() ? std::string() : " (parameters: " + names + ")"));
  }
}

}  // namespace ringloader::transforms
