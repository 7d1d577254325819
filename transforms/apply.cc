// SPDX-License-Identifier: BSD-3-Clause
// apply_pipeline: the whole per-sample path without a ring, for debugging,
// tests and in-process use.
#include <memory>

#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "transforms/compiled_pipeline.h"
#include "transforms/decode/decode.h"

namespace ringloader {

TransformedSample apply_pipeline(const Pipeline& pipeline,
                                 const std::vector<uint8_t>& encoded_image,
                                 ColorMode mode, uint64_t seed, uint64_t epoch,
                                 uint64_t index, const std::string& source) {
  transforms::Image image, scratch;
  SampleRng rng(seed, epoch, index);
  // The pipeline may need the size (Resize without a crop): compile it for
  // the size the header gives, then let it plan what to decode.
  std::unique_ptr<transforms::CompiledPipeline> compiled;
  transforms::RegionPlanner plan = [&](int height, int width,
                                       transforms::RegionPlan& region) {
    compiled = std::make_unique<transforms::CompiledPipeline>(pipeline, mode, height, width);
    transforms::RegionPlanner first_op = compiled->region_planner(rng);
    return first_op && first_op(height, width, region);
  };
  transforms::decode_image(encoded_image.data(), encoded_image.size(), mode, source, image,
                           {}, plan);
  if (!compiled) {
    compiled = std::make_unique<transforms::CompiledPipeline>(pipeline, mode, image.height,
                                                              image.width);
  }
  TransformedSample out;
  out.shape = compiled->output_shape();
  out.bytes.resize(out.shape.bytes());
  compiled->run(image, scratch, rng, out.bytes.data());
  return out;
}

}  // namespace ringloader
