// SPDX-License-Identifier: BSD-3-Clause
// Transform pipelines, spelled like torchvision.transforms.
//
// A Pipeline is plain data: a list of ops, each a name and JSON parameters with
// torchvision's names and defaults. The trainer validates it at Loader
// construction (unknown op, bad parameter, output size that is not fixed all
// throw OptionError there) and ships its JSON to spawned workers, which
// rebuild it. Ops run on 8-bit images (HWC); ToTensor / PILToTensor end the
// image part (only Normalize and RandomErasing may follow) and decide the
// sample's dtype and layout:
//   no tensor op   -> uint8,   HWC  (channels last)
//   PILToTensor()  -> uint8,   CHW
//   ToTensor()     -> float32, CHW, scaled to [0, 1]; Normalize may follow.
//
//   ringloader::Pipeline pipeline{
//       ringloader::RandomResizedCrop(224), ringloader::RandomHorizontalFlip(),
//       ringloader::ToTensor(),
//       ringloader::Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})};
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringloader/export.h"

namespace ringloader {

// One op: torchvision's class name and its parameters.
struct RINGLOADER_EXPORT Op {
  std::string name;
  nlohmann::json params = nlohmann::json::object();
};

enum class DType : uint8_t { kUInt8 = 0, kFloat32 = 1 };
enum class Layout : uint8_t { kHWC = 0, kCHW = 1 };

// The fixed shape of one transformed sample; a batch is N of these.
struct RINGLOADER_EXPORT SampleShape {
  int channels = 0;
  int height = 0;
  int width = 0;
  DType dtype = DType::kUInt8;
  Layout layout = Layout::kHWC;

  size_t element_size() const { return dtype == DType::kFloat32 ? 4 : 1; }
  size_t bytes() const {
    return static_cast<size_t>(channels) * height * width * element_size();
  }
  bool operator==(const SampleShape& o) const {
    return channels == o.channels && height == o.height && width == o.width &&
           dtype == o.dtype && layout == o.layout;
  }
};

// How a pipeline computes its pixels. Chosen per pipeline; both modes run
// the same ops with the same random draws (same crop boxes, same flips).
enum class PipelineMode : uint8_t {
  // Pixel for pixel what torchvision (PIL backend) gives: the default.
  kExact = 0,
  // Faster and approximate, for training where a few levels of difference
  // do not matter (docs/transforms.md lists the measured PSNR vs kExact):
  //  * a JPEG whose RandomResizedCrop box shrinks >= 2x is decoded at a
  //    reduced DCT scale (1/2, 1/4, 1/8: libjpeg-turbo's scaling, fast IDCT,
  //    no fancy upsampling), and only around the box;
  //  * RandomResizedCrop and Resize use OpenCV's SIMD resize (INTER_AREA
  //    when shrinking >= 2x, else INTER_LINEAR; INTER_CUBIC to enlarge with
  //    "bicubic");
  //  * a trailing RandomHorizontalFlip is fused into the ToTensor /
  //    Normalize write, straight into the ring slot.
  // Other ops run as in kExact. Needs a build with OpenCV (OptionError
  // otherwise, at construction).
  kFast = 1,
};

// Resampling filters (PIL's; torchvision's InterpolationMode). JSON and
// Python spell them "nearest", "bilinear", "bicubic".
enum class Interpolation : uint8_t { kNearest = 0, kBilinear = 1, kBicubic = 2 };
// How padding is filled (torchvision's padding_mode): "constant", "edge",
// "reflect", "symmetric" in JSON and Python.
enum class PaddingMode : uint8_t { kConstant = 0, kEdge = 1, kReflect = 2, kSymmetric = 3 };
// The JSON / Python spelling of each, and back (OptionError listing the
// valid names for an unknown one).
RINGLOADER_EXPORT const char* name_of(Interpolation mode);
RINGLOADER_EXPORT const char* name_of(PaddingMode mode);
RINGLOADER_EXPORT Interpolation interpolation_from_name(const std::string& name);
RINGLOADER_EXPORT PaddingMode padding_mode_from_name(const std::string& name);

// How decoded images are converted before the first op, like PIL's
// Image.convert(mode): "RGB" (3 channels) or "L" (1 channel).
enum class ColorMode : uint8_t { kRGB = 0, kGray = 1 };

// A value: a list of op descriptions and a mode. Not thread-safe to modify
// (add, set_mode), safe to read and copy from any number of threads once
// built. A Loader compiles its own copy at construction; workers receive it
// as JSON.
class RINGLOADER_EXPORT Pipeline {
 public:
  Pipeline() = default;
  Pipeline(std::initializer_list<Op> ops) : ops_(ops) {}
  explicit Pipeline(std::vector<Op> ops) : ops_(std::move(ops)) {}

  Pipeline& add(Op op) {
    ops_.push_back(std::move(op));
    return *this;
  }
  const std::vector<Op>& ops() const { return ops_; }

  //   ringloader::Pipeline pipeline{...};
  //   pipeline.set_mode(ringloader::PipelineMode::kFast);
  Pipeline& set_mode(PipelineMode mode) {
    mode_ = mode;
    return *this;
  }
  PipelineMode mode() const { return mode_; }

  // Exact mode: the list of ops, [{"op": "Resize", "size": [256], ...}, ...].
  // Fast mode: {"mode": "fast", "ops": [...]}. from_json reads both forms
  // ({"mode": "exact", ...} too).
  nlohmann::json to_json() const;
  // Throws OptionError naming the op and parameter (or key) that is wrong.
  static Pipeline from_json(const nlohmann::json& description);

  // Validates every op and computes the output shape for inputs of `mode`
  // whose size is `height` x `width` (0 when images vary in size).
  // Throws OptionError if an op or parameter is invalid or the output size
  // would depend on the image.
  SampleShape output_shape(ColorMode mode, int height = 0, int width = 0) const;

 private:
  std::vector<Op> ops_;
  PipelineMode mode_ = PipelineMode::kExact;
};

// One sample run through a pipeline in this process: decode, ops, tensor
// stage. The bytes equal what a worker writes for sample `index` of `epoch`
// (the same random stream), so it doubles as a debugging and testing aid.
struct RINGLOADER_EXPORT TransformedSample {
  SampleShape shape;
  std::vector<uint8_t> bytes;  // shape.bytes() long, in shape's layout
};
// Throws DecodeError (naming `source`) or OptionError.
RINGLOADER_EXPORT TransformedSample apply_pipeline(const Pipeline& pipeline,
                                 const std::vector<uint8_t>& encoded_image,
                                 ColorMode mode, uint64_t seed = 0,
                                 uint64_t epoch = 0, uint64_t index = 0,
                                 const std::string& source = "<memory>");

// The default of one op parameter, read from the op spec table
// (transforms/op_specs.cc, where every op's parameters, defaults, ranges and
// docs are written once; docs/transforms.md lists them). The builders below
// take their defaults from it; it converts to the parameter's type (None is
// an empty list). Throws Error if the table has no such parameter.
class RINGLOADER_EXPORT OpDefault {
 public:
  OpDefault(const char* op, const char* param);
  operator double() const;
  operator bool() const;
  operator int() const;
  operator std::pair<double, double>() const;
  operator std::vector<int>() const;
  operator std::vector<double>() const;
  operator std::string() const;
  operator Interpolation() const;
  operator PaddingMode() const;

 private:
  const nlohmann::json* value_;  // in the table, which lives as long as the process
};

// The op spec table as JSON (for bindings and doc checks): a list of
// {"name", "doc", "open", "params": [{"name", "type", "default", "required",
// "choices", "range", "doc"}]}.
RINGLOADER_EXPORT nlohmann::json op_specs_json();

// --- Op builders, with torchvision's parameter names and defaults. ---------
// Sizes follow torchvision: one int means "shorter side" for Resize and a
// square for crops; two ints are (height, width).
RINGLOADER_EXPORT Op Resize(std::vector<int> size,
          Interpolation interpolation = OpDefault("Resize", "interpolation"),
          bool antialias = OpDefault("Resize", "antialias"));
RINGLOADER_EXPORT Op CenterCrop(std::vector<int> size);
RINGLOADER_EXPORT Op RandomCrop(std::vector<int> size,
              std::vector<int> padding = OpDefault("RandomCrop", "padding"),
              bool pad_if_needed = OpDefault("RandomCrop", "pad_if_needed"),
              std::vector<int> fill = OpDefault("RandomCrop", "fill"),
              PaddingMode padding_mode = OpDefault("RandomCrop", "padding_mode"));
RINGLOADER_EXPORT Op RandomResizedCrop(
    std::vector<int> size,
    std::pair<double, double> scale = OpDefault("RandomResizedCrop", "scale"),
    std::pair<double, double> ratio = OpDefault("RandomResizedCrop", "ratio"),
    Interpolation interpolation = OpDefault("RandomResizedCrop", "interpolation"));
RINGLOADER_EXPORT
Op RandomHorizontalFlip(double p = OpDefault("RandomHorizontalFlip", "p"));
RINGLOADER_EXPORT Op RandomVerticalFlip(double p = OpDefault("RandomVerticalFlip", "p"));
RINGLOADER_EXPORT Op ToTensor();
RINGLOADER_EXPORT Op PILToTensor();
RINGLOADER_EXPORT Op Normalize(std::vector<double> mean, std::vector<double> std);
// transforms.v2's ToDtype, right after PILToTensor: kUInt8 keeps the tensor;
// kFloat32 with scale gives x * (1 / 255) in float32 (v2's arithmetic, which
// differs from ToTensor's x / 255 by one ulp on 126 values), without scale x.
RINGLOADER_EXPORT Op ToDtype(DType dtype, bool scale = OpDefault("ToDtype", "scale"));

// torchvision's containers around image ops (v1 and v2 draw alike): all of
// `ops` with probability p; one of them, picked with `weights` (empty: equal);
// all of them in a uniformly drawn order. The output size may depend on the
// draw only where a later crop fixes it; the channel count may not.
RINGLOADER_EXPORT Op RandomApply(std::vector<Op> ops, double p = OpDefault("RandomApply", "p"));
RINGLOADER_EXPORT Op RandomChoice(std::vector<Op> ops, std::vector<double> weights = {});
RINGLOADER_EXPORT Op RandomOrder(std::vector<Op> ops);

// Colour. Ranges are (min, max); the single-number forms of torchvision
// (brightness=0.4 meaning (0.6, 1.4), hue=0.1 meaning (-0.1, 0.1)) are
// accepted in JSON too. An order of the four adjustments is drawn per
// sample, like torchvision's randperm(4).
RINGLOADER_EXPORT
Op ColorJitter(double brightness = OpDefault("ColorJitter", "brightness"),
               double contrast = OpDefault("ColorJitter", "contrast"),
               double saturation = OpDefault("ColorJitter", "saturation"),
               double hue = OpDefault("ColorJitter", "hue"));
RINGLOADER_EXPORT
Op ColorJitter(std::pair<double, double> brightness, std::pair<double, double> contrast,
               std::pair<double, double> saturation, std::pair<double, double> hue);
// num_output_channels 1 or 3: changes the sample's channel count.
RINGLOADER_EXPORT
Op Grayscale(int num_output_channels = OpDefault("Grayscale", "num_output_channels"));
RINGLOADER_EXPORT Op RandomGrayscale(double p = OpDefault("RandomGrayscale", "p"));
// kernel_size: one odd int or (x, y); sigma drawn uniformly in (min, max).
RINGLOADER_EXPORT Op GaussianBlur(std::vector<int> kernel_size,
                std::pair<double, double> sigma = OpDefault("GaussianBlur", "sigma"));

// Geometry (PIL's Image.rotate / Image.transform). fill: one value or one per channel. expand makes
// the output size depend on the angle, so a crop or Resize([h, w]) must
// follow unless the angle is fixed.
RINGLOADER_EXPORT Op RandomRotation(
    std::pair<double, double> degrees,
    Interpolation interpolation = OpDefault("RandomRotation", "interpolation"),
    bool expand = OpDefault("RandomRotation", "expand"),
    std::vector<double> center = OpDefault("RandomRotation", "center"),
    std::vector<int> fill = OpDefault("RandomRotation", "fill"));
// translate: max fractions (x, y), {} for none; scale: (min, max), {} for
// none; shear: {}, (min, max) along x, or (xmin, xmax, ymin, ymax).
RINGLOADER_EXPORT Op RandomAffine(std::pair<double, double> degrees,
                std::vector<double> translate = OpDefault("RandomAffine", "translate"),
                std::vector<double> scale = OpDefault("RandomAffine", "scale"),
                std::vector<double> shear = OpDefault("RandomAffine", "shear"),
                Interpolation interpolation = OpDefault("RandomAffine", "interpolation"),
                std::vector<int> fill = OpDefault("RandomAffine", "fill"),
                std::vector<double> center = OpDefault("RandomAffine", "center"));

// Tensor stage: after ToTensor (or PILToTensor), before or after Normalize.
// value: one number or one per channel; RandomErasingNoise() fills with
// standard normal noise instead (torchvision's value='random').
RINGLOADER_EXPORT Op RandomErasing(double p = OpDefault("RandomErasing", "p"),
                 std::pair<double, double> scale = OpDefault("RandomErasing", "scale"),
                 std::pair<double, double> ratio = OpDefault("RandomErasing", "ratio"),
                 std::vector<double> value = OpDefault("RandomErasing", "value"));
RINGLOADER_EXPORT Op RandomErasingNoise(double p = OpDefault("RandomErasing", "p"),
                      std::pair<double, double> scale = OpDefault("RandomErasing", "scale"),
                      std::pair<double, double> ratio = OpDefault("RandomErasing", "ratio"));

// The AutoAugment family (PIL's ops, torchvision's policies and draws; the
// draws come from the sample's stream). fill: one value or one per channel
// for the area warps uncover, {} for torchvision's None (0). AugMix runs
// its ops on tensors, as torchvision does, and takes nearest or bilinear.
RINGLOADER_EXPORT Op AutoAugment(
    std::string policy = OpDefault("AutoAugment", "policy"),
    Interpolation interpolation = OpDefault("AutoAugment", "interpolation"),
    std::vector<double> fill = OpDefault("AutoAugment", "fill"));
RINGLOADER_EXPORT Op RandAugment(
    int num_ops = OpDefault("RandAugment", "num_ops"),
    int magnitude = OpDefault("RandAugment", "magnitude"),
    int num_magnitude_bins = OpDefault("RandAugment", "num_magnitude_bins"),
    Interpolation interpolation = OpDefault("RandAugment", "interpolation"),
    std::vector<double> fill = OpDefault("RandAugment", "fill"));
RINGLOADER_EXPORT Op TrivialAugmentWide(
    int num_magnitude_bins = OpDefault("TrivialAugmentWide", "num_magnitude_bins"),
    Interpolation interpolation = OpDefault("TrivialAugmentWide", "interpolation"),
    std::vector<double> fill = OpDefault("TrivialAugmentWide", "fill"));
RINGLOADER_EXPORT Op AugMix(int severity = OpDefault("AugMix", "severity"),
                            int mixture_width = OpDefault("AugMix", "mixture_width"),
                            int chain_depth = OpDefault("AugMix", "chain_depth"),
                            double alpha = OpDefault("AugMix", "alpha"),
                            bool all_ops = OpDefault("AugMix", "all_ops"),
                            Interpolation interpolation = OpDefault("AugMix", "interpolation"),
                            std::vector<double> fill = OpDefault("AugMix", "fill"));

// What one of the ops above draws for samples first_index .. first_index +
// count - 1 of `epoch` when it is a pipeline's first op and the decoded
// image is height x width: per sample {"steps": [[op name, magnitude],
// ...]} (torchvision's _apply_op arguments, in order) and, for AugMix,
// "chains" (one such list per chain), "beta" ([m0, m1]) and "weights" (the
// chains' mixing weights). For explaining a sample's augmentation and for
// checking the draws against torchvision's. For TimmRandAugment (timm's
// RandAugment, which the Python converter of timm transforms builds): per
// sample a list of [op name, magnitude, argument, filter]. Throws
// OptionError for an invalid op or one that is not of the family.
RINGLOADER_EXPORT nlohmann::json augment_draws(const Op& op, int height, int width,
                                               uint64_t seed, uint64_t epoch,
                                               uint64_t first_index, uint64_t count = 1);

inline Op Resize(int size,
                 Interpolation interpolation = OpDefault("Resize", "interpolation")) {
  return Resize(std::vector<int>{size}, interpolation);
}
inline Op CenterCrop(int size) { return CenterCrop(std::vector<int>{size}); }
inline Op RandomResizedCrop(int size) {
  return RandomResizedCrop(std::vector<int>{size});
}
inline Op GaussianBlur(int kernel_size,
                       std::pair<double, double> sigma = OpDefault("GaussianBlur", "sigma")) {
  return GaussianBlur(std::vector<int>{kernel_size}, sigma);
}
inline Op RandomRotation(double degrees) { return RandomRotation({-degrees, degrees}); }
inline Op RandomCrop(int size, int padding = 0) {
  return RandomCrop(std::vector<int>{size},
                    padding ? std::vector<int>{padding} : std::vector<int>{});
}

}  // namespace ringloader
