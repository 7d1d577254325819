// SPDX-License-Identifier: BSD-3-Clause
// Test support: reference results computed by PIL / torchvision themselves,
// through tests/unit/transforms/reference/torchvision_reference.py run by
// /usr/bin/python3 (the interpreter with torch). Header-only so every test
// file can use it without a second glob in tests/CMakeLists.txt.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringloader::testing {

inline const char* kPython = "/usr/bin/python3";

inline std::string reference_script() {
  return std::string(RINGLOADER_SOURCE_DIR) + "/tests/unit/transforms/reference/torchvision_reference.py";
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// One scratch folder per test process, holding inputs and results, removed
// when the process exits: ctest runs each test as a process of its own, and
// each folder holds ~150 MB of reference batches.
inline const std::string& scratch_dir() {
  struct Scratch {
    std::string path;
    ~Scratch() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove_all(path, ignored);
    }
  };
  static const Scratch dir = [] {
    char pattern[] = "/tmp/ringloader_transforms_XXXXXX";
    if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp /tmp failed");
    return Scratch{pattern};
  }();
  return dir.path;
}

// True when /usr/bin/python3 can import torchvision and PIL.
inline bool reference_available() {
  static const bool available =
      std::system((std::string(kPython) +
                   " -c 'import torchvision, PIL, numpy' >/dev/null 2>&1").c_str()) == 0;
  return available;
}

#define RINGLOADER_REQUIRE_REFERENCE()                                          \
  if (!::ringloader::testing::reference_available())                           \
  GTEST_SKIP() << "/usr/bin/python3 with torchvision is not installed: no reference"

inline int run_python(const std::string& arguments) {
  const std::string log = scratch_dir() + "/python.log";
  return std::system((std::string(kPython) + " " + reference_script() + " " + arguments +
                      " >" + log + " 2>&1")
                         .c_str());
}

// The encoded test images (made once per process): name -> path.
struct ReferenceInput {
  std::string name, path;
};
inline const std::vector<ReferenceInput>& reference_inputs() {
  static const std::vector<ReferenceInput> inputs = [] {
    std::vector<ReferenceInput> out;
    const std::string dir = scratch_dir() + "/inputs";
    if (run_python("inputs " + dir) != 0) return out;
    std::ifstream in(dir + "/inputs.json");
    for (const auto& entry : nlohmann::json::parse(in)) {
      out.push_back({entry["name"], entry["file"]});
    }
    return out;
  }();
  return inputs;
}
inline std::string input_path(const std::string& name) {
  for (const auto& input : reference_inputs()) {
    if (input.name == name) return input.path;
  }
  ADD_FAILURE() << "no reference input named " << name;
  return "";
}

// What torchvision produced for one case.
struct Reference {
  std::string error;  // PIL failed to open/convert: its message
  std::vector<int64_t> shape;
  std::string dtype;  // "uint8" or "float32"
  std::vector<uint8_t> bytes;
};

// A case: open `input`, convert(mode), then `steps` (see the script).
struct ReferenceCase {
  std::string input;
  std::string mode;  // "RGB" or "L"
  nlohmann::json steps = nlohmann::json::array();
};

// Runs every case in one Python process (importing torch costs seconds).
inline std::vector<Reference> torchvision_apply(const std::vector<ReferenceCase>& cases) {
  static int batch = 0;
  const std::string prefix = scratch_dir() + "/batch" + std::to_string(batch++);
  nlohmann::json request = nlohmann::json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    request.push_back({{"input", cases[i].input}, {"mode", cases[i].mode},
                       {"steps", cases[i].steps},
                       {"output", prefix + "_" + std::to_string(i) + ".bin"}});
  }
  std::ofstream(prefix + ".json") << request.dump();
  std::vector<Reference> out(cases.size());
  if (run_python("apply " + prefix + ".json") != 0) {
    ADD_FAILURE() << "the reference script failed; see " << scratch_dir() << "/python.log";
    return out;
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = prefix + "_" + std::to_string(i) + ".bin";
    std::ifstream meta_file(path + ".json");
    const auto meta = nlohmann::json::parse(meta_file);
    if (meta.contains("error")) {
      out[i].error = meta["error"].get<std::string>();
      continue;
    }
    out[i].shape = meta["shape"].get<std::vector<int64_t>>();
    out[i].dtype = meta["dtype"].get<std::string>();
    out[i].bytes = read_bytes(path);
  }
  return out;
}

// Largest |a - b| over elements of `dtype`; infinity when sizes differ.
inline double max_abs_diff(const void* ours, size_t our_bytes, const Reference& reference) {
  if (our_bytes != reference.bytes.size()) return INFINITY;
  double worst = 0;
  if (reference.dtype == "float32") {
    const auto* a = static_cast<const float*>(ours);
    const auto* b = reinterpret_cast<const float*>(reference.bytes.data());
    for (size_t i = 0; i < our_bytes / 4; ++i) {
      worst = std::max(worst, std::fabs(double{a[i]} - double{b[i]}));
    }
  } else {
    const auto* a = static_cast<const uint8_t*>(ours);
    for (size_t i = 0; i < our_bytes; ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - reference.bytes[i]));
    }
  }
  return worst;
}

}  // namespace ringloader::testing
