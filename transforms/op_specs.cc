// SPDX-License-Identifier: BSD-3-Clause
// The op spec table (see op_specs.h): the one place where an op's parameters,
// their defaults (torchvision 0.14's), types, ranges and docs are written.
// Adding an op is its kernel plus one entry here and one factory line in
// pipeline.cc.
#include "transforms/op_specs.h"

#include <map>

#include "ringloader/errors.h"
#include "ringloader/transforms.h"

namespace ringloader::transforms {
namespace {

using json = nlohmann::json;

// Indexed by the enums' values (transforms.h): the one spelling of each.
const std::vector<std::string> kInterpolations = {"nearest", "bilinear", "bicubic"};
const std::vector<std::string> kPaddingModes = {"constant", "edge", "reflect", "symmetric"};

ParamSpec required(std::string name, ParamType type, std::string doc) {
  ParamSpec out{std::move(name), type, nullptr, true, {}, 0, 0, std::move(doc)};
  return out;
}
ParamSpec optional(std::string name, ParamType type, json value, std::string doc) {
  return {std::move(name), type, std::move(value), false, {}, 0, 0, std::move(doc)};
}
ParamSpec number(std::string name, double value, double low, double high, std::string doc) {
  return {std::move(name), ParamType::kNumber, value, false, {}, low, high, std::move(doc)};
}
ParamSpec probability(double value, std::string doc) {
  return number("p", value, 0.0, 1.0, std::move(doc));
}
ParamSpec choice(std::string name, std::string value, std::vector<std::string> choices,
                 std::string doc) {
  return {std::move(name), ParamType::kChoice, std::move(value), false, std::move(choices),
          0, 0, std::move(doc)};
}
ParamSpec interpolation(std::string value) {
  return choice("interpolation", std::move(value), kInterpolations, "resampling filter");
}
ParamSpec size_param(std::string doc) { return required("size", ParamType::kInts, std::move(doc)); }
ParamSpec fill(std::string doc) { return optional("fill", ParamType::kInts, 0, std::move(doc)); }
ParamSpec augment_fill() {
  return optional("fill", ParamType::kNumbers, nullptr,
                  "fill outside warped images: one value or one per channel; None: 0");
}
ParamSpec padding_mode() {
  return choice("padding_mode", "constant", kPaddingModes, "how padded pixels are filled");
}
ParamSpec ops_param() {
  return {"transforms", ParamType::kOps, nullptr, true, {}, 0, 0,
          "the ops: image ops (before PILToTensor/ToTensor), nested containers allowed"};
}
ParamSpec unused(std::string name, json value, std::string doc) {
  return optional(std::move(name), ParamType::kBool, std::move(value), std::move(doc));
}

std::vector<OpSpec> make_specs() {
  const std::string crop_size = "output size: one int (square) or [h, w]";
  const std::string jitter = "a number x (range around the identity) or [min, max]";
  return {
      {"Resize", "Resize the shorter side to size[0], or to [h, w]; PIL's filters.",
       {size_param("one int (shorter side) or [h, w]"), interpolation("bilinear"),
        {"max_size", ParamType::kNumber, nullptr, false, {}, 0, 1e9,
         "cap on the longer side (single size only); None: no cap"},
        unused("antialias", true, "must be true (PIL always antialiases)")}},
      {"CenterCrop", "Crop the centre; pads with 0 when the image is smaller.",
       {size_param(crop_size)}},
      {"Pad", "Pad the borders.",
       {required("padding", ParamType::kInts, "1, 2 (left/right, top/bottom) or 4 (l, t, r, b) ints"),
        fill("constant fill: one value or one per channel"), padding_mode()}},
      {"RandomCrop", "Crop at a random position, optionally after padding.",
       {size_param(crop_size),
        optional("padding", ParamType::kInts, nullptr, "padding first, as Pad; None: none"),
        optional("pad_if_needed", ParamType::kBool, false, "pad when the image is smaller"),
        fill("constant fill: one value or one per channel"), padding_mode()}},
      {"RandomResizedCrop", "Crop a random area and aspect ratio, resized to size.",
       {size_param(crop_size),
        optional("scale", ParamType::kNumbers, {0.08, 1.0}, "[min, max] fraction of the area"),
        optional("ratio", ParamType::kNumbers, {3.0 / 4.0, 4.0 / 3.0},
                 "[min, max] aspect ratio (drawn log-uniformly)"),
        choice("interpolation", "bilinear", {"nearest", "bilinear", "bicubic", "random"},
               "resampling filter; random: bilinear or bicubic per sample (timm's)"),
        unused("antialias", true, "accepted, ignored (PIL always antialiases)")}},
      {"RandomHorizontalFlip", "Mirror left-right with probability p.",
       {probability(0.5, "probability of a flip")}},
      {"RandomVerticalFlip", "Mirror top-bottom with probability p.",
       {probability(0.5, "probability of a flip")}},
      {"ColorJitter", "Random brightness, contrast, saturation and hue, in a random order.",
       {optional("brightness", ParamType::kNumbers, 0, jitter),
        optional("contrast", ParamType::kNumbers, 0, jitter),
        optional("saturation", ParamType::kNumbers, 0, jitter),
        optional("hue", ParamType::kNumbers, 0, "a number x <= 0.5 or [min, max] in [-0.5, 0.5]")}},
      {"Grayscale", "Convert to grayscale (ITU-R 601-2 luma).",
       {number("num_output_channels", 1, 1, 3, "1 or 3")}},
      {"RandomGrayscale", "Grayscale with probability p, keeping the channel count.",
       {probability(0.1, "probability of the conversion")}},
      {"GaussianBlur", "Blur with a Gaussian kernel whose sigma is drawn per sample.",
       {required("kernel_size", ParamType::kInts, "one odd int or [x, y]"),
        optional("sigma", ParamType::kNumbers, {0.1, 2.0}, "a number or [min, max]")}},
      {"RandomRotation", "Rotate by a random angle (PIL's Image.rotate).",
       {required("degrees", ParamType::kNumbers, "a number x (range [-x, x]) or [min, max]"),
        interpolation("nearest"),
        optional("expand", ParamType::kBool, false, "grow the output to hold the whole image"),
        optional("center", ParamType::kNumbers, nullptr, "[x, y]; None: the image centre"),
        optional("fill", ParamType::kNumbers, 0, "one value or one per channel")}},
      {"RandomAffine", "Random rotation, translation, scale and shear (PIL's Image.transform).",
       {required("degrees", ParamType::kNumbers, "a number x (range [-x, x]) or [min, max]"),
        optional("translate", ParamType::kNumbers, nullptr, "max fractions [x, y]; None: none"),
        optional("scale", ParamType::kNumbers, nullptr, "[min, max]; None: none"),
        optional("shear", ParamType::kNumbers, nullptr,
                 "x, [min, max] along x, or [xmin, xmax, ymin, ymax]; None: none"),
        interpolation("nearest"),
        optional("fill", ParamType::kNumbers, 0, "one value or one per channel"),
        optional("center", ParamType::kNumbers, nullptr, "[x, y]; None: the image centre")}},
      {"AutoAugment", "AutoAugment's learned sub-policies (torchvision's draws and PIL ops).",
       {choice("policy", "imagenet", {"imagenet", "cifar10", "svhn"}, "the learned policy"),
        interpolation("nearest"), augment_fill()}},
      {"RandAugment", "num_ops ops drawn uniformly, each at a fixed magnitude bin, signs at random.",
       {number("num_ops", 2, 0, 1000, "ops applied in sequence"),
        number("magnitude", 9, 0, 1e6, "the magnitude bin, below num_magnitude_bins"),
        number("num_magnitude_bins", 31, 2, 1e6, "bins between no change and the op's maximum"),
        interpolation("nearest"), augment_fill()}},
      {"TrivialAugmentWide", "One op and one magnitude bin drawn uniformly (wide ranges).",
       {number("num_magnitude_bins", 31, 2, 1e6, "bins between no change and the op's maximum"),
        interpolation("nearest"), augment_fill()}},
      {"AugMix", "Chains of random ops mixed with Dirichlet and Beta weights (on tensors).",
       {number("severity", 3, 1, 10, "magnitude bins drawn from: the first `severity` of 10"),
        number("mixture_width", 3, 1, 1000, "number of chains"),
        number("chain_depth", -1, -1e6, 1000, "ops per chain; <= 0: 1 to 3 at random"),
        number("alpha", 1.0, 0, 1e9, "Dirichlet and Beta concentration, > 0"),
        optional("all_ops", ParamType::kBool, true, "include Brightness, Color, Contrast, Sharpness"),
        choice("interpolation", "bilinear", {"nearest", "bilinear"}, "resampling filter"),
        augment_fill()}},
      {"ResizeKeepRatio", "timm's ResizeKeepRatio: keep the aspect, optional random scale and stretch.",
       {size_param("target [h, w] (one int: square)"),
        number("longest", 0, 0, 1, "0: fit the shorter side ratio, 1: the longer, between: a blend"),
        choice("interpolation", "bilinear", {"nearest", "bilinear", "bicubic", "random"},
               "resampling filter; random: bilinear or bicubic per sample (timm's)"),
        number("random_scale_prob", 0, 0, 1, "probability of a random scale"),
        optional("random_scale_range", ParamType::kNumbers, {0.85, 1.05}, "[min, max] scale factor"),
        optional("random_scale_area", ParamType::kBool, false, "factor is of the area (1/sqrt)"),
        number("random_aspect_prob", 0, 0, 1, "probability of a random stretch"),
        optional("random_aspect_range", ParamType::kNumbers, {0.9, 1.11},
                 "[min, max] aspect change (log-uniform)")}},
      {"TimmRandAugment", "timm's RandAugment (timm/data/auto_augment.py): its ops, noise and levels.",
       {required("ops", ParamType::kString, "timm op names, comma-separated (its _RAND_*TRANSFORMS)"),
        number("num_layers", 2, 0, 1000, "ops drawn per image, uniformly with replacement"),
        number("prob", 0.5, 0, 1, "probability each drawn op applies"),
        number("magnitude", 10, 0, 1e6, "timm's M (level, 10 is the top)"),
        number("magnitude_std", 0, 0, 1e9, "std of Gaussian noise on M (mstd); 0: none"),
        optional("magnitude_uniform", ParamType::kBool, false, "M drawn uniformly in [0, M] (mstd > 100)"),
        number("magnitude_max", 10, 0, 1e6, "upper clamp of the noisy M (mmax)"),
        number("translate_const", 250, 0, 1e9, "TranslateX/Y pixels at level 10"),
        number("translate_pct", 0.45, 0, 1e3, "TranslateX/YRel fraction at level 10"),
        choice("interpolation", "random", {"nearest", "bilinear", "bicubic", "random"},
               "resampling filter of geometric ops; random: bilinear or bicubic per op"),
        optional("fill", ParamType::kInts, std::vector<int>{128, 128, 128},
                 "fill outside warped images (timm's img_mean): one value or one per channel")}},
      {"RandomApply", "Run the listed ops, all or none: with probability p (one draw).",
       {ops_param(), probability(0.5, "probability of running the ops")}},
      {"RandomChoice", "Run one of the listed ops, drawn with weights p.",
       {ops_param(),
        optional("p", ParamType::kNumbers, nullptr, "one weight per op; None: equal weights")}},
      {"RandomOrder", "Run every listed op, in an order drawn uniformly.", {ops_param()}},
      {"ToTensor", "End the image part: float32 CHW in [0, 1].", {}},
      {"PILToTensor", "End the image part: uint8 CHW.", {}},
      {"ToDtype", "Right after PILToTensor: the uint8 tensor as dtype (transforms.v2's ToDtype).",
       {{"dtype", ParamType::kChoice, nullptr, true, {"float32", "uint8"}, 0, 0,
         "the output dtype"},
        optional("scale", ParamType::kBool, false,
                 "uint8 to float32: x * (1 / 255) as v2 computes it; false: the values as they are")}},
      {"Normalize", "(x - mean) / std per channel, after ToTensor or a float ToDtype.",
       {required("mean", ParamType::kNumbers, "one value or one per channel"),
        required("std", ParamType::kNumbers, "one value or one per channel, no zero"),
        unused("inplace", false, "accepted, ignored")}},
      {"RandomErasing", "Erase a random rectangle of the tensor with probability p.",
       {probability(0.5, "probability of an erase"),
        optional("scale", ParamType::kNumbers, {0.02, 0.33}, "[min, max] fraction of the area"),
        optional("ratio", ParamType::kNumbers, {0.3, 3.3}, "[min, max] aspect ratio"),
        {"value", ParamType::kNumbersOrChoice, 0, false, {"random", "random_per_channel"}, 0, 0,
         "one value, one per channel, 'random' (standard normal noise per value) or "
         "'random_per_channel' (one standard normal per channel: timm's mode='rand')"},
        unused("inplace", false, "accepted, ignored")}},
      {"Custom", "An op from a C++ shared library (include/ringloader/custom_op.h).",
       {required("library", ParamType::kString, "path of the shared library"),
        required("name", ParamType::kString, "the op's registered name")},
       /*open=*/true},
  };
}

const char* type_name(ParamType type) {
  switch (type) {
    case ParamType::kInts: return "ints";
    case ParamType::kNumber: return "number";
    case ParamType::kNumbers: return "numbers";
    case ParamType::kBool: return "bool";
    case ParamType::kChoice: return "choice";
    case ParamType::kString: return "string";
    case ParamType::kNumbersOrChoice: return "numbers_or_choice";
    case ParamType::kOps: return "ops";
  }
  return "?";
}

}  // namespace

const std::vector<OpSpec>& op_specs() {
  static const std::vector<OpSpec> specs = make_specs();
  return specs;
}

const OpSpec* find_op_spec(const std::string& op) {
  for (const OpSpec& spec : op_specs()) {
    if (spec.name == op) return &spec;
  }
  return nullptr;
}

const ParamSpec& param_spec(const std::string& op, const std::string& param) {
  if (const OpSpec* spec = find_op_spec(op)) {
    for (const ParamSpec& p : spec->params) {
      if (p.name == param) return p;
    }
  }
  throw Error("ringloader: op spec table has no parameter '" + param + "' for op " + op);
}

json op_specs_json() {
  json out = json::array();
  for (const OpSpec& op : op_specs()) {
    json params = json::array();
    for (const ParamSpec& p : op.params) {
      json entry = {{"name", p.name}, {"type", type_name(p.type)},
                    {"default", p.default_value}, {"required", p.required},
                    {"choices", p.choices}, {"doc", p.doc}};
      if (p.type == ParamType::kNumber) entry["range"] = {p.low, p.high};
      params.push_back(std::move(entry));
    }
    out.push_back({{"name", op.name}, {"doc", op.doc}, {"open", op.open},
                   {"params", std::move(params)}});
  }
  return out;
}

}  // namespace ringloader::transforms

// --- the public face: builders' defaults and the table as JSON ---------------

namespace ringloader {

OpDefault::OpDefault(const char* op, const char* param)
    : value_(&transforms::param_spec(op, param).default_value) {}

OpDefault::operator double() const { return value_->get<double>(); }
OpDefault::operator bool() const { return value_->get<bool>(); }
OpDefault::operator int() const { return value_->get<int>(); }
OpDefault::operator std::string() const { return value_->get<std::string>(); }
OpDefault::operator std::pair<double, double>() const {
  return {value_->at(0).get<double>(), value_->at(1).get<double>()};
}
OpDefault::operator std::vector<int>() const {
  if (value_->is_null()) return {};
  if (!value_->is_array()) return {value_->get<int>()};
  return value_->get<std::vector<int>>();
}
OpDefault::operator std::vector<double>() const {
  if (value_->is_null()) return {};
  if (!value_->is_array()) return {value_->get<double>()};
  return value_->get<std::vector<double>>();
}

nlohmann::json op_specs_json() { return transforms::op_specs_json(); }

namespace {
template <typename Enum>
Enum from_name(const std::vector<std::string>& names, const std::string& name,
               const char* what) {
  std::string valid;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
    valid += (valid.empty() ? "" : ", ") + names[i];
  }
  throw OptionError(std::string("ringloader: ") + what + " '" + name +
                    "' is not supported; expected one of: " + valid);
}
}  // namespace

const char* name_of(Interpolation mode) {
  return transforms::kInterpolations.at(static_cast<size_t>(mode)).c_str();
}
const char* name_of(PaddingMode mode) {
  return transforms::kPaddingModes.at(static_cast<size_t>(mode)).c_str();
}
Interpolation interpolation_from_name(const std::string& name) {
  return from_name<Interpolation>(transforms::kInterpolations, name, "interpolation");
}
PaddingMode padding_mode_from_name(const std::string& name) {
  return from_name<PaddingMode>(transforms::kPaddingModes, name, "padding_mode");
}
OpDefault::operator Interpolation() const {
  return interpolation_from_name(value_->get<std::string>());
}
OpDefault::operator PaddingMode() const {
  return padding_mode_from_name(value_->get<std::string>());
}

}  // namespace ringloader
