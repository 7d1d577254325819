// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer harness for pipelines as data: any text is either refused with
// an OptionError (or a JSON parse error) naming what is wrong, or builds a
// pipeline whose output shape is fixed and which then runs on a small image
// writing exactly that many bytes. Workers rebuild pipelines from this JSON,
// so the parser must never crash or accept something it cannot run.
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringloader/errors.h"
#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "transforms/compiled_pipeline.h"

namespace {

// Pipelines with huge sizes (Pad 10^9) are valid and would allocate that
// much in a real worker too (which reports the failure); the fuzzer looks
// for memory bugs, so it runs only pipelines of modest sizes.
bool modest(const nlohmann::json& value) {
  if (value.is_number()) return std::abs(value.get<double>()) <= 512;
  if (value.is_array() || value.is_object()) {
    for (const auto& item : value) {
      if (!modest(item)) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringloader;
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json description = nlohmann::json::parse(text, nullptr, false);
  if (description.is_discarded()) return 0;
  try {
    Pipeline pipeline = Pipeline::from_json(description);
    SampleShape shape = pipeline.output_shape(ColorMode::kRGB, 0, 0);
    if (shape.bytes() == 0 || !modest(description)) return 0;
    transforms::CompiledPipeline compiled(pipeline, ColorMode::kRGB);
    if (!(compiled.output_shape() == shape)) std::abort();
    transforms::Image image, scratch;
    image.width = 37;
    image.height = 23;
    image.channels = 3;
    image.pixels.assign(37 * 23 * 3, 0);
    for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i * 31);
    std::vector<uint8_t> out(shape.bytes() + 64, 0xab);
    SampleRng rng(1, 2, 3);
    try {
      compiled.run(image, scratch, rng, out.data());
    } catch (const Error&) {
      // Refusals that depend on the image (a crop or blur kernel larger
      // than this 37x23 image) are errors a worker reports for the sample.
      return 0;
    }
    for (size_t i = shape.bytes(); i < out.size(); ++i) {
      if (out[i] != 0xab) std::abort();  // wrote past its sample
    }
  } catch (const OptionError&) {
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}
