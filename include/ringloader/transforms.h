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

namespace ringloader {

// One op: torchvision's class name and its parameters.
struct Op {
  std::string name;
  nlohmann::json params = nlohmann::json::object();
};

enum class DType : uint8_t { kUInt8 = 0, kFloat32 = 1 };
enum class Layout : uint8_t { kHWC = 0, kCHW = 1 };

// The fixed shape of one transformed sample; a batch is N of these.
struct SampleShape {
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

// How decoded images are converted before the first op, like PIL's
// Image.convert(mode): "RGB" (3 channels) or "L" (1 channel).
enum class ColorMode : uint8_t { kRGB = 0, kGray = 1 };

class Pipeline {
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
struct TransformedSample {
  SampleShape shape;
  std::vector<uint8_t> bytes;  // shape.bytes() long, in shape's layout
};
// Throws DecodeError (naming `source`) or OptionError.
TransformedSample apply_pipeline(const Pipeline& pipeline,
                                 const std::vector<uint8_t>& encoded_image,
                                 ColorMode mode, uint64_t seed = 0,
                                 uint64_t epoch = 0, uint64_t index = 0,
                                 const std::string& source = "<memory>");

// --- Op builders, with torchvision's parameter names and defaults. ---------
// Sizes follow torchvision: one int means "shorter side" for Resize and a
// square for crops; two ints are (height, width).
// interpolation: "nearest", "bilinear" (default), "bicubic".
Op Resize(std::vector<int> size, const std::string& interpolation = "bilinear",
          bool antialias = true);
Op CenterCrop(std::vector<int> size);
Op RandomCrop(std::vector<int> size, std::vector<int> padding = {},
              bool pad_if_needed = false, std::vector<int> fill = {0},
              const std::string& padding_mode = "constant");
Op RandomResizedCrop(std::vector<int> size,
                     std::pair<double, double> scale = {0.08, 1.0},
                     std::pair<double, double> ratio = {3.0 / 4.0, 4.0 / 3.0},
                     const std::string& interpolation = "bilinear");
Op RandomHorizontalFlip(double p = 0.5);
Op RandomVerticalFlip(double p = 0.5);
Op ToTensor();
Op PILToTensor();
Op Normalize(std::vector<double> mean, std::vector<double> std);

// Colour. Ranges are (min, max); the single-number forms of torchvision
// (brightness=0.4 meaning (0.6, 1.4), hue=0.1 meaning (-0.1, 0.1)) are
// accepted in JSON too. An order of the four adjustments is drawn per
// sample, like torchvision's randperm(4).
Op ColorJitter(double brightness = 0, double contrast = 0, double saturation = 0,
               double hue = 0);
Op ColorJitter(std::pair<double, double> brightness, std::pair<double, double> contrast,
               std::pair<double, double> saturation, std::pair<double, double> hue);
// num_output_channels 1 or 3: changes the sample's channel count.
Op Grayscale(int num_output_channels = 1);
Op RandomGrayscale(double p = 0.1);
// kernel_size: one odd int or (x, y); sigma drawn uniformly in (min, max).
Op GaussianBlur(std::vector<int> kernel_size,
                std::pair<double, double> sigma = {0.1, 2.0});

// Geometry (PIL's Image.rotate / Image.transform). interpolation: "nearest"
// (default), "bilinear" or "bicubic". fill: one value or one per channel. expand makes
// the output size depend on the angle, so a crop or Resize([h, w]) must
// follow unless the angle is fixed.
Op RandomRotation(std::pair<double, double> degrees,
                  const std::string& interpolation = "nearest", bool expand = false,
                  std::vector<double> center = {}, std::vector<int> fill = {0});
// translate: max fractions (x, y), {} for none; scale: (min, max), {} for
// none; shear: {}, (min, max) along x, or (xmin, xmax, ymin, ymax).
Op RandomAffine(std::pair<double, double> degrees, std::vector<double> translate = {},
                std::vector<double> scale = {}, std::vector<double> shear = {},
                const std::string& interpolation = "nearest", std::vector<int> fill = {0},
                std::vector<double> center = {});

// Tensor stage: after ToTensor (or PILToTensor), before or after Normalize.
// value: one number or one per channel; RandomErasingNoise() fills with
// standard normal noise instead (torchvision's value='random').
Op RandomErasing(double p = 0.5, std::pair<double, double> scale = {0.02, 0.33},
                 std::pair<double, double> ratio = {0.3, 3.3},
                 std::vector<double> value = {0});
Op RandomErasingNoise(double p = 0.5, std::pair<double, double> scale = {0.02, 0.33},
                      std::pair<double, double> ratio = {0.3, 3.3});

inline Op Resize(int size, const std::string& interpolation = "bilinear") {
  return Resize(std::vector<int>{size}, interpolation);
}
inline Op CenterCrop(int size) { return CenterCrop(std::vector<int>{size}); }
inline Op RandomResizedCrop(int size) {
  return RandomResizedCrop(std::vector<int>{size});
}
inline Op GaussianBlur(int kernel_size, std::pair<double, double> sigma = {0.1, 2.0}) {
  return GaussianBlur(std::vector<int>{kernel_size}, sigma);
}
inline Op RandomRotation(double degrees) { return RandomRotation({-degrees, degrees}); }
inline Op RandomCrop(int size, int padding = 0) {
  return RandomCrop(std::vector<int>{size},
                    padding ? std::vector<int>{padding} : std::vector<int>{});
}

}  // namespace ringloader
