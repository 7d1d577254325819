// apply_pipeline: the whole per-sample path without a ring, for debugging,
// tests and in-process use.
#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "transforms/compiled_pipeline.h"
#include "transforms/decode.h"

namespace ringloader {

TransformedSample apply_pipeline(const Pipeline& pipeline,
                                 const std::vector<uint8_t>& encoded_image,
                                 ColorMode mode, uint64_t seed, uint64_t epoch,
                                 uint64_t index, const std::string& source) {
  transforms::Image image, scratch;
  transforms::decode_image(encoded_image.data(), encoded_image.size(), mode, source,
                           image);
  // The pipeline may need the size (Resize without a crop): compile for it.
  transforms::CompiledPipeline compiled(pipeline, mode, image.height, image.width);
  TransformedSample out;
  out.shape = compiled.output_shape();
  out.bytes.resize(out.shape.bytes());
  SampleRng rng(seed, epoch, index);
  compiled.run(image, scratch, rng, out.bytes.data());
  return out;
}

}  // namespace ringloader
