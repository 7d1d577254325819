// SPDX-License-Identifier: BSD-3-Clause
// Reading one op's JSON parameters with validation: every problem becomes
// an OptionError naming the op, its position and the parameter. Defaults,
// numeric ranges and allowed strings come from the op spec table
// (op_specs.cc), never from the reader's caller.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ringloader/errors.h"
#include "ringloader/transforms.h"
#include "transforms/op_specs.h"

namespace ringloader::transforms {

// Whether Python's int(v) lands in [0, 255], checked on the double: casting
// an out-of-range double (1e26, NaN) to int is undefined behaviour.
inline bool int_fits_uint8(double v) { return v > -1.0 && v < 256.0; }

class OpParams {
 public:
  OpParams(const Op& op, size_t position)
      : op_(op), position_(position), spec_(find_op_spec(op.name)) {}

  // A list of ints (a bare int counts as one), with `counts` allowed sizes.
  // Absent: the spec's default (None is the empty list).
  std::vector<int> ints(const std::string& key, const std::set<size_t>& counts,
                        bool positive);
  // A list of numbers (a bare number counts as one); `counts` empty: any size.
  std::vector<double> numbers(const std::string& key, const std::set<size_t>& counts);
  // One number within the spec's [low, high].
  double number(const std::string& key);
  bool boolean(const std::string& key);
  // One of the spec's choices.
  std::string choice(const std::string& key);
  bool has(const std::string& key) const;
  // has(), and counts the parameter as read (a None that needs no reading).
  bool present(const std::string& key);
  // A required string parameter.
  std::string text(const std::string& key);
  // Every parameter not read yet, now counted as read: for ops that check
  // their own parameters (custom ops).
  nlohmann::json rest();
  // Throws if the op has a parameter nobody read (a typo, an unsupported one).
  void finish() const;

  [[noreturn]] void fail(const std::string& key, const std::string& why) const;
  const Op& op() const { return op_; }
  size_t position() const { return position_; }

 private:
  const nlohmann::json* find(const std::string& key);
  // The spec of `key`; Error (a bug, not a user error) if the table lacks it.
  const ParamSpec& spec(const std::string& key) const;
  // The value read, or the spec's default when absent.
  const nlohmann::json& value_or_default(const std::string& key);
  const Op& op_;
  size_t position_;
  const OpSpec* spec_;
  std::set<std::string> read_;
};

}  // namespace ringloader::transforms
