// SPDX-License-Identifier: BSD-3-Clause
// Custom image ops: your own C++ transform in a shared library, named by a
// pipeline and loaded by path in the trainer (validation, output shape, at
// Loader construction) and in every spawned worker.
//
//   // solarize.cc -> libsolarize.so. Header-only: link nothing of ringloader.
//   #include <ringloader/custom_op.h>
//
//   class Solarize final : public ringloader::CustomOp {
//    public:
//     explicit Solarize(const nlohmann::json& params)
//         : threshold_(params.value("threshold", 128)) {
//       if (threshold_ < 0 || threshold_ > 256)
//         throw std::invalid_argument("'threshold' must be in [0, 256]");
//     }
//     void apply(const ringloader::CustomImage& in, ringloader::CustomImage& out,
//                ringloader::CustomRandom&) const override {
//       for (size_t i = 0; i < in.bytes(); ++i)
//         out.pixels[i] = in.pixels[i] >= threshold_ ? 255 - in.pixels[i] : in.pixels[i];
//     }
//    private:
//     int threshold_;
//   };
//
//   RINGLOADER_CUSTOM_OPS(registry) { registry.add<Solarize>("Solarize"); }
//
// and in the pipeline (C++, JSON, or Python's ringloader.transforms.Custom):
//
//   ringloader::Custom("/abs/path/libsolarize.so", "Solarize", {{"threshold", 100}})
//   {"op": "Custom", "library": "/abs/path/libsolarize.so", "name": "Solarize",
//    "threshold": 100}
//
// A library that cannot be loaded, lacks the entry point, or has no op of
// that name, and parameters the op's constructor refuses (any exception,
// its message kept) raise OptionError at construction, naming the library
// and the op. samples/custom_op/ is a complete example.
//
// The interface crossing the library boundary is deliberately small: one C
// entry point, abstract classes with virtual functions, plain structs, and
// parameters as JSON text (parsed inside your library). It changes only
// with the entry point's version suffix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "ringloader/export.h"

namespace ringloader {

// An 8-bit image: `height` rows of `width` pixels of `channels` interleaved
// bytes (HWC, RGB or L), no row padding.
struct RINGLOADER_EXPORT CustomImage {
  int height = 0;
  int width = 0;
  int channels = 0;
  uint8_t* pixels = nullptr;

  size_t bytes() const { return static_cast<size_t>(height) * width * channels; }
  uint8_t* pixel(int y, int x) const {
    return pixels + (static_cast<size_t>(y) * width + x) * channels;
  }
};

// The sample's own random stream (counter-based: depends only on seed,
// epoch and the sample, never on the worker; a tar sample is keyed by its
// shard and place there, any other by its index). Draw in a fixed order.
class RINGLOADER_EXPORT CustomRandom {
 public:
  virtual double uniform() = 0;                               // [0, 1)
  virtual int64_t integer(int64_t low, int64_t high) = 0;     // [low, high]

 protected:
  ~CustomRandom() = default;
};

class RINGLOADER_EXPORT CustomOp {
 public:
  virtual ~CustomOp() = default;
  // Output (height, width) for an input of (height, width). Inputs of 0
  // mean "varies" (images of different sizes): return 0 unless your output
  // size is fixed. Default: the input's size.
  virtual std::pair<int, int> output_size(int height, int width) const {
    return {height, width};
  }
  // Writes `out` (already sized by output_size, same channels as `in`).
  // `in` and `out` never overlap. Throw std::exception to fail the sample.
  virtual void apply(const CustomImage& in, CustomImage& out,
                     CustomRandom& random) const = 0;
};

class RINGLOADER_EXPORT CustomOpRegistry {
 public:
  // `create` makes an op from its parameters (JSON text: the pipeline
  // entry without "op", "library", "name"); it throws std::exception with
  // a readable message for bad ones. ringloader deletes the op.
  using Factory = CustomOp* (*)(const char* params_json);
  virtual void add_factory(const char* name, Factory create) = 0;

  // An op class with a constructor taking `const nlohmann::json&`.
  template <class Op>
  void add(const char* name) {
    add_factory(name, [](const char* params_json) -> CustomOp* {
      return new Op(nlohmann::json::parse(params_json));
    });
  }

 protected:
  ~CustomOpRegistry() = default;
};

// The op builder for pipelines (defined in libringloader, not in yours).
struct Op;
RINGLOADER_EXPORT Op Custom(const std::string& library, const std::string& name,
          nlohmann::json params = nlohmann::json::object());

}  // namespace ringloader

// The one symbol ringloader looks up in your library.
#define RINGLOADER_CUSTOM_OPS_ENTRY ringloader_custom_ops_v1
#define RINGLOADER_CUSTOM_OPS(registry)                                       \
  extern "C" __attribute__((visibility("default"))) void                     \
  RINGLOADER_CUSTOM_OPS_ENTRY(::ringloader::CustomOpRegistry& registry)
