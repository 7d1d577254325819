// SPDX-License-Identifier: BSD-3-Clause
// A Pipeline turned into runnable ops. Built once per process (trainer or
// worker) from the Pipeline's JSON; run once per sample.
#pragma once

#include <memory>
#include <vector>

#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "transforms/decode/decode.h"
#include "transforms/image.h"

namespace ringloader::transforms {

class OpParams;

// One image op. It transforms `in` in place as far as the caller can tell:
// the result is left in `in`; `out` is scratch it may resize (most ops
// write there and swap the two, so no pixels are copied back).
class ImageOp {
 public:
  virtual ~ImageOp() = default;
  virtual void apply(Image& in, Image& out, SampleRng& rng) const = 0;
  // Output (height, width) for an input of (height, width); 0 = varies.
  virtual std::pair<int, int> output_size(int height, int width) const = 0;
  // Output channels for `channels` in (Grayscale changes them; most ops keep).
  virtual int output_channels(int channels) const { return channels; }
  // Ops that read only a box of the image, known from its size (crops):
  // the box apply() will read from a whole image of this size, drawing from
  // `rng` exactly as apply() does. Such an op, when first, also accepts a
  // partial image (Image::window) holding at least that box. Others: false.
  virtual bool plan_region(int /*height*/, int /*width*/, SampleRng& /*rng*/,
                           RegionPlan& /*plan*/) const {
    return false;
  }
};

class CompiledPipeline {
 public:
  // Throws OptionError (naming op and parameter) on any invalid op.
  CompiledPipeline(const Pipeline& pipeline, ColorMode mode, int height = 0,
                   int width = 0);
  ~CompiledPipeline();

  const SampleShape& output_shape() const { return shape_; }

  // Transforms `image` (consumed) and writes exactly output_shape().bytes()
  // bytes at `destination`, the sample's place in the ring slot. `scratch`
  // is the caller's reusable buffer (one per thread: run() is const and
  // thread-safe). `rng` is the sample's own stream.
  void run(Image& image, Image& scratch, SampleRng& rng,
           void* destination) const;

  // What to pass decode_image for the sample whose stream is `rng`: the
  // first op's box (planned on a copy of the stream, so run() draws the
  // same values again), or nothing when the pipeline needs whole images.
  RegionPlanner region_planner(const SampleRng& rng) const;

 private:
  struct TensorStage;  // ToTensor / PILToTensor / Normalize, fused; RandomErasing
  void add_erasing(OpParams& params, int channels);
  void add_to_dtype(OpParams& params);
  std::vector<std::unique_ptr<ImageOp>> image_ops_;
  std::unique_ptr<TensorStage> tensor_stage_;
  SampleShape shape_;
};

}  // namespace ringloader::transforms
