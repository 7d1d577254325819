// SPDX-License-Identifier: BSD-3-Clause
// The op spec table: every op's parameters (type, default, allowed values or
// range, doc) and its doc, written once in op_specs.cc. Everything else reads
// it: OpParams (defaults, ranges, choices and the error messages of the JSON
// parser), the C++ builders' default arguments (OpDefault), the Python
// classes (through _ringloader.op_specs()) and the op table in
// docs/transforms.md (checked by python/tests/test_op_specs.py).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringloader::transforms {

// What a parameter holds, as JSON. Checks beyond these (odd kernel sizes,
// (min, max) order, float32 finiteness) stay with the op's reader.
enum class ParamType {
  kInts,         // an int or a list of ints (sizes, paddings, fills)
  kNumber,       // one number, within [low, high]
  kNumbers,      // a number or a list of numbers (ranges, means)
  kBool,
  kChoice,       // one string of `choices`
  kString,       // free text (Custom's library path and op name)
  kNumbersOrChoice,  // numbers, or one string of `choices` (RandomErasing's value)
  kOps,          // a list of op objects (RandomApply, RandomChoice, RandomOrder)
};

struct ParamSpec {
  std::string name;
  ParamType type;
  // torchvision's default; null is its None. Ignored when required.
  nlohmann::json default_value;
  bool required = false;
  std::vector<std::string> choices;  // kChoice, kNumbersOrChoice
  double low = 0, high = 0;          // kNumber
  std::string doc;
};

struct OpSpec {
  std::string name;
  std::string doc;
  std::vector<ParamSpec> params;
  // Takes parameters beyond `params` (Custom: they go to the op's constructor).
  bool open = false;
};

// Every op, in the order of docs/transforms.md.
const std::vector<OpSpec>& op_specs();
// nullptr for an op that is not in the table.
const OpSpec* find_op_spec(const std::string& op);
// Throws Error when `op` has no such parameter: a bug in the caller.
const ParamSpec& param_spec(const std::string& op, const std::string& param);

// The table as JSON: [{"name", "doc", "open", "params": [{"name", "type",
// "default", "required", "choices", "low", "high", "doc"}]}].
nlohmann::json op_specs_json();

}  // namespace ringloader::transforms
