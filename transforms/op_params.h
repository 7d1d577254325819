// Reading one op's JSON parameters with validation: every problem becomes
// an OptionError naming the op, its position and the parameter.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ringloader/errors.h"
#include "ringloader/transforms.h"

namespace ringloader::transforms {

// Whether Python's int(v) lands in [0, 255], checked on the double: casting
// an out-of-range double (1e26, NaN) to int is undefined behaviour.
inline bool int_fits_uint8(double v) { return v > -1.0 && v < 256.0; }

class OpParams {
 public:
  OpParams(const Op& op, size_t position) : op_(op), position_(position) {}

  // A list of ints (a bare int counts as one), with `counts` allowed sizes.
  std::vector<int> ints(const std::string& key, std::vector<int> fallback,
                        const std::set<size_t>& counts, bool positive);
  std::vector<double> numbers(const std::string& key, std::vector<double> fallback,
                              const std::set<size_t>& counts);
  double number(const std::string& key, double fallback, double low, double high);
  bool boolean(const std::string& key, bool fallback);
  std::string choice(const std::string& key, const std::string& fallback,
                     const std::set<std::string>& allowed);
  bool has(const std::string& key) const;
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
  const Op& op_;
  size_t position_;
  std::set<std::string> read_;
};

}  // namespace ringloader::transforms
