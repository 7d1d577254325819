// SPDX-License-Identifier: BSD-3-Clause
// Test support for the parity suites: a case is our pipeline plus the
// torchvision steps that should give the same tensor; run_checks runs a
// batch of them through apply_pipeline() and the reference script and
// compares. Header-only, like torchvision_reference.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "ringloader/transforms.h"
#include "tests/unit/transforms/torchvision_reference.h"

namespace ringloader::testing {

// One case: our pipeline and torchvision's steps for the same input.
struct Check {
  std::string label;
  std::string input;
  ColorMode mode;
  Pipeline pipeline;
  nlohmann::json steps;
  uint64_t index = 0;  // the sample's RNG stream
};

constexpr uint64_t kSeed = 1234;

// A pipeline's ops as torchvision transform steps.
inline nlohmann::json as_steps(const Pipeline& pipeline) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& op : pipeline.to_json()) steps.push_back({{"fn", "transform"}, {"op", op}});
  return steps;
}

inline Check deterministic(const std::string& label, const std::string& input, ColorMode mode,
                           const Pipeline& pipeline) {
  return {label, input_path(input), mode, pipeline, as_steps(pipeline)};
}

// The worst difference for one label prefix, and how many values differed.
struct Agreement {
  double max_diff = 0;
  size_t differing = 0, values = 0;
};

// Runs every check; returns the agreement per label prefix (the word before
// the first space), prints it, and fails any case above `tolerance`.
inline std::map<std::string, Agreement> run_checks(const std::vector<Check>& checks,
                                                   double tolerance) {
  std::vector<ReferenceCase> cases;
  for (const auto& c : checks) {
    cases.push_back({c.input, c.mode == ColorMode::kGray ? "L" : "RGB", c.steps});
  }
  const auto references = torchvision_apply(cases);
  std::map<std::string, Agreement> worst;
  for (size_t i = 0; i < checks.size(); ++i) {
    const Check& c = checks[i];
    SCOPED_TRACE(c.label + " on " + c.input + " (case " + std::to_string(i) + ")");
    EXPECT_TRUE(references[i].error.empty()) << references[i].error;
    const auto sample = apply_pipeline(c.pipeline, read_bytes(c.input), c.mode, kSeed, 0,
                                       c.index, c.input);
    EXPECT_EQ(sample.shape.dtype == DType::kFloat32 ? "float32" : "uint8",
              references[i].dtype);
    std::vector<int64_t> shape = {sample.shape.channels, sample.shape.height,
                                  sample.shape.width};
    if (sample.shape.layout == Layout::kHWC) {
      shape = {sample.shape.height, sample.shape.width, sample.shape.channels};
    }
    EXPECT_EQ(shape, references[i].shape);
    const double diff = max_abs_diff(sample.bytes.data(), sample.bytes.size(), references[i]);
    EXPECT_LE(diff, tolerance);
    Agreement& entry = worst[c.label.substr(0, c.label.find(' '))];
    entry.max_diff = std::max(entry.max_diff, diff);
    if (sample.bytes.size() == references[i].bytes.size()) {
      const size_t width = sample.shape.element_size();
      for (size_t v = 0; v < sample.bytes.size(); v += width) {
        entry.differing +=
            std::memcmp(&sample.bytes[v], &references[i].bytes[v], width) != 0;
      }
      entry.values += sample.bytes.size() / width;
    }
  }
  for (const auto& [op, agreement] : worst) {
    std::cout << "  max |ours - torchvision| for " << op << ": " << agreement.max_diff << " ("
              << agreement.differing << " of " << agreement.values << " values differ)\n";
  }
  return worst;
}

}  // namespace ringloader::testing
