// SPDX-License-Identifier: BSD-3-Clause
// Pipelines as data: JSON in and out, op builders, validation, and the
// compiled form workers run. Every check happens here, at construction.
#include <functional>
#include <map>

#include "ringloader/transforms.h"
#include "transforms/affine_ops.h"
#include "transforms/auto_augment.h"
#include "transforms/color_ops.h"
#include "transforms/compiled_pipeline.h"
#include "transforms/gaussian_blur.h"
#include "transforms/custom_ops.h"
#include "transforms/fast_ops.h"
#include "transforms/image_ops.h"
#include "transforms/op_params.h"
#include "transforms/random_containers.h"
#include "transforms/random_erasing.h"
#include "transforms/resize_keep_ratio.h"
#include "transforms/tensor_stage.h"
#include "transforms/timm_augment.h"

namespace ringloader {
namespace transforms {

struct CompiledPipeline::TensorStage {
  bool to_tensor = false;
  bool pil_to_tensor = false;
  ByteScale scale = ByteScale::kDivide;  // how ToTensor / ToDtype make floats
  std::vector<double> mean, std;
  std::unique_ptr<TensorWriter> writer;
  // RandomErasing ops in order, each with whether Normalize comes after it.
  std::vector<std::pair<ErasingParams, bool>> erasing;
  std::vector<RandomErasing> erasers;
  // Fast mode: a trailing RandomHorizontalFlip(p) done by the writer.
  double fused_flip_p = -1;
};

namespace {

Interpolation interpolation(OpParams& params) {
  return interpolation_from_name(params.choice("interpolation"));
}

std::pair<int, int> crop_size(OpParams& params) {
  std::vector<int> size = params.ints("size", {1, 2}, true);
  return {size[0], size.size() == 2 ? size[1] : size[0]};
}

Padding padding(OpParams& params, const std::string& key, bool required) {
  Padding out;
  std::vector<int> values = params.ints(key, required ? std::set<size_t>{1, 2, 4}
                                                      : std::set<size_t>{0, 1, 2, 4},
                                        false);
  if (values.size() == 1) out.ltrb = {values[0], values[0], values[0], values[0]};
  if (values.size() == 2) out.ltrb = {values[0], values[1], values[0], values[1]};
  if (values.size() == 4) out.ltrb = {values[0], values[1], values[2], values[3]};
  out.mode = padding_mode_from_name(params.choice("padding_mode"));
  out.fill = params.ints("fill", {1, 3}, false);
  return out;
}

std::array<double, 2> ordered_pair(OpParams& params, const std::string& key, bool positive) {
  std::vector<double> v = params.numbers(key, {2});
  if (v[0] > v[1]) params.fail(key, "must be (min, max)");
  if (positive && !(v[0] > 0)) params.fail(key, "must be positive");
  return {v[0], v[1]};
}

using ImageOpFactory = std::function<std::unique_ptr<ImageOp>(OpParams&)>;

std::unique_ptr<ImageOp> gaussian_blur_op(OpParams& p) {
  std::vector<int> kernel = p.ints("kernel_size", {1, 2}, true);
  for (int k : kernel) {
    if (k % 2 == 0) p.fail("kernel_size", "must be odd, got " + std::to_string(k));
  }
  std::vector<double> sigma = p.numbers("sigma", {1, 2});
  if (sigma.size() == 1) sigma.push_back(sigma[0]);
  // Drawn as float32 (torch's uniform_): positive there too.
  if (!(static_cast<float>(sigma[0]) > 0 && sigma[0] <= sigma[1])) {
    p.fail("sigma", "must be positive, a number or (min, max)");
  }
  return make_gaussian_blur(kernel[0], kernel.size() == 2 ? kernel[1] : kernel[0],
                            {sigma[0], sigma[1]});
}

std::unique_ptr<ImageOp> grayscale_op(OpParams& p) {
  const double channels = p.number("num_output_channels");
  if (channels != 1 && channels != 3) p.fail("num_output_channels", "must be 1 or 3");
  return make_grayscale(static_cast<int>(channels));
}

ImageOpFactory augment_factory(AugmentFamily family) {
  return [family](OpParams& p) { return make_augment(augment_params(p, family)); };
}

const std::map<std::string, ImageOpFactory>& image_op_factories();

// An op inside RandomApply / RandomChoice / RandomOrder: an image op
// (exact mode's), checked as a top-level one is.
std::unique_ptr<ImageOp> nested_image_op(const Op& op, size_t position) {
  auto factory = image_op_factories().find(op.name);
  if (factory == image_op_factories().end() || op.name == "Custom") {
    throw OptionError("ringloader: pipeline op " + std::to_string(position) + ": '" + op.name +
                      "' cannot run inside a random container (image ops only)");
  }
  OpParams params(op, position);
  std::unique_ptr<ImageOp> built = factory->second(params);
  params.finish();
  return built;
}

std::unique_ptr<ImageOp> container_op(OpParams& p) {
  return make_random_container(p, nested_image_op);
}

const std::map<std::string, ImageOpFactory>& image_op_factories() {
  static const std::map<std::string, ImageOpFactory> factories = {
      {"Resize", [](OpParams& p) {
         auto size = p.ints("size", {1, 2}, true);
         int max_size = p.present("max_size") ? static_cast<int>(p.number("max_size")) : 0;
         if (max_size && size.size() == 2) p.fail("max_size", "needs a single size");
         if (max_size && max_size <= size[0]) p.fail("max_size", "must exceed size");
         if (!p.boolean("antialias")) {
           p.fail("antialias", "false is not supported (PIL always antialiases)");
         }
         auto mode = interpolation(p);
         return make_resize(size, mode, max_size);
       }},
      {"CenterCrop", [](OpParams& p) {
         auto [h, w] = crop_size(p);
         return make_center_crop(h, w);
       }},
      {"RandomCrop", [](OpParams& p) {
         auto [h, w] = crop_size(p);
         Padding pad = padding(p, "padding", false);
         return make_random_crop(h, w, pad, p.boolean("pad_if_needed"));
       }},
      {"Pad", [](OpParams& p) { return make_pad(padding(p, "padding", true)); }},
      {"RandomResizedCrop", [](OpParams& p) {
         auto [h, w] = crop_size(p);
         auto scale = ordered_pair(p, "scale", true);
         auto ratio = ordered_pair(p, "ratio", true);
         p.boolean("antialias");
         const std::string mode = p.choice("interpolation");
         if (mode == "random") return make_random_resized_crop(h, w, scale, ratio, std::nullopt);
         return make_random_resized_crop(h, w, scale, ratio, interpolation_from_name(mode));
       }},
      {"RandomHorizontalFlip", [](OpParams& p) {
         return make_flip(true, p.number("p"));
       }},
      {"RandomVerticalFlip", [](OpParams& p) {
         return make_flip(false, p.number("p"));
       }},
      {"ColorJitter", [](OpParams& p) { return make_color_jitter(color_jitter_ranges(p)); }},
      {"Grayscale", grayscale_op},
      {"RandomGrayscale", [](OpParams& p) {
         return make_random_grayscale(p.number("p"));
       }},
      {"GaussianBlur", gaussian_blur_op},
      {"RandomRotation", [](OpParams& p) { return make_random_rotation(rotation_params(p)); }},
      {"RandomAffine", [](OpParams& p) { return make_random_affine(affine_params(p)); }},
      {"AutoAugment", augment_factory(AugmentFamily::kAutoAugment)},
      {"RandAugment", augment_factory(AugmentFamily::kRandAugment)},
      {"TrivialAugmentWide", augment_factory(AugmentFamily::kTrivialAugmentWide)},
      {"AugMix", augment_factory(AugmentFamily::kAugMix)},
      {"ResizeKeepRatio", [](OpParams& p) { return make_resize_keep_ratio(p); }},
      {"TimmRandAugment", [](OpParams& p) { return make_timm_augment(timm_augment_params(p)); }},
      {"RandomApply", container_op},
      {"RandomChoice", container_op},
      {"RandomOrder", container_op},
      {"Custom", [](OpParams& p) { return make_custom_op(p); }},
  };
  return factories;
}

std::string supported_ops() {
  std::string names;
  for (const OpSpec& spec : op_specs()) names += (names.empty() ? "" : ", ") + spec.name;
  return names;
}

}  // namespace

CompiledPipeline::CompiledPipeline(const Pipeline& pipeline, ColorMode mode,
                                   int height, int width)
    : tensor_stage_(std::make_unique<TensorStage>()) {
  int channels = mode == ColorMode::kGray ? 1 : 3;
  const bool fast = pipeline.mode() == PipelineMode::kFast;
  if (fast && !fast_mode_available()) {
    throw OptionError("ringloader: pipeline mode \"fast\" needs a ringloader built with "
                      "OpenCV (libopencv-dev); this build has none");
  }
  int last_image_op = -1;
  const auto& ops = pipeline.ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    OpParams params(ops[i], i);
    auto tensor_op = [&](const char* why) {
      if (tensor_stage_->to_tensor || tensor_stage_->pil_to_tensor) {
        throw OptionError("ringloader: pipeline op " + std::to_string(i) + " (" +
                          ops[i].name + ") " + why);
      }
    };
    auto factory = image_op_factories().find(ops[i].name);
    if (factory != image_op_factories().end()) {
      tensor_op("is an image op after ToTensor/PILToTensor");
      std::unique_ptr<ImageOp> fast_op = fast ? make_fast_image_op(params) : nullptr;
      image_ops_.push_back(fast_op ? std::move(fast_op) : factory->second(params));
      last_image_op = static_cast<int>(i);
      std::tie(height, width) = image_ops_.back()->output_size(height, width);
      channels = image_ops_.back()->output_channels(channels);
    } else if (ops[i].name == "ToTensor" || ops[i].name == "PILToTensor") {
      tensor_op("follows another tensor op");
      (ops[i].name == "ToTensor" ? tensor_stage_->to_tensor : tensor_stage_->pil_to_tensor) = true;
    } else if (ops[i].name == "ToDtype") {
      add_to_dtype(params);
    } else if (ops[i].name == "Normalize") {
      if (!tensor_stage_->to_tensor || !tensor_stage_->mean.empty()) {
        throw OptionError("ringloader: pipeline op " + std::to_string(i) +
                          " (Normalize) must follow ToTensor or a float ToDtype, once");
      }
      tensor_stage_->mean = params.numbers("mean", {1, static_cast<size_t>(channels)});
      tensor_stage_->std = params.numbers("std", {1, static_cast<size_t>(channels)});
      params.boolean("inplace");
      for (double s : tensor_stage_->std) {
        if (s == 0) params.fail("std", "has a zero (division by zero)");
      }
      tensor_stage_->mean.resize(channels, tensor_stage_->mean[0]);
      tensor_stage_->std.resize(channels, tensor_stage_->std[0]);
      for (auto& erasing : tensor_stage_->erasing) erasing.second = true;
    } else if (ops[i].name == "RandomErasing") {
      add_erasing(params, channels);
    } else {
      throw OptionError("ringloader: pipeline op " + std::to_string(i) + " '" +
                        ops[i].name + "' is not supported; supported ops: " +
                        supported_ops());
    }
    params.finish();
  }
  const bool has_tensor_op = tensor_stage_->to_tensor || tensor_stage_->pil_to_tensor;
  // A flip right before the tensor write is fused into it (it reads each row
  // backwards): the same bytes with one pass over the pixels fewer, so exact
  // mode does it too.
  if (has_tensor_op && last_image_op >= 0 &&
      ops[last_image_op].name == "RandomHorizontalFlip") {
    tensor_stage_->fused_flip_p = OpParams(ops[last_image_op], last_image_op).number("p");
    image_ops_.pop_back();
  }
  if (height <= 0 || width <= 0) {
    throw OptionError("ringloader: pipeline output size depends on the image: end "
                      "with a crop (CenterCrop, RandomCrop, RandomResizedCrop) or "
                      "Resize([h, w])");
  }
  shape_ = {channels, height, width,
            tensor_stage_->to_tensor ? DType::kFloat32 : DType::kUInt8,
            tensor_stage_->to_tensor || tensor_stage_->pil_to_tensor ? Layout::kCHW
                                                                     : Layout::kHWC};
  tensor_stage_->writer = std::make_unique<TensorWriter>(
      shape_.dtype, shape_.layout, channels, tensor_stage_->mean, tensor_stage_->std,
      tensor_stage_->scale);
  for (const auto& [erasing, normalized_after] : tensor_stage_->erasing) {
    tensor_stage_->erasers.emplace_back(
        erasing, shape_, normalized_after ? tensor_stage_->mean : std::vector<double>{},
        normalized_after ? tensor_stage_->std : std::vector<double>{});
  }
}

// transforms.v2's ToDtype, right after PILToTensor: uint8 stays (a no-op);
// float32 is ToTensor's layout with v2's arithmetic (x * (1 / 255)) or none.
void CompiledPipeline::add_to_dtype(OpParams& params) {
  const bool after_pil_to_tensor = tensor_stage_->pil_to_tensor && tensor_stage_->erasing.empty();
  if (!after_pil_to_tensor) {
    throw OptionError("ringloader: pipeline op " + std::to_string(params.position()) +
                      " (ToDtype) must follow PILToTensor directly");
  }
  const bool scale = params.boolean("scale");
  if (params.choice("dtype") == "uint8") return;
  tensor_stage_->pil_to_tensor = false;
  tensor_stage_->to_tensor = true;
  tensor_stage_->scale = scale ? ByteScale::kReciprocal : ByteScale::kNone;
}

// RandomErasing runs on tensors (torchvision refuses PIL images), so it must
// follow ToTensor or PILToTensor.
void CompiledPipeline::add_erasing(OpParams& params, int channels) {
  if (!tensor_stage_->to_tensor && !tensor_stage_->pil_to_tensor) {
    throw OptionError("ringloader: pipeline op " + std::to_string(params.position()) +
                      " (RandomErasing) must follow ToTensor or PILToTensor");
  }
  ErasingParams erasing = erasing_params(params, channels);
  if (tensor_stage_->pil_to_tensor) {
    if (erasing.random_value) params.fail("value", "'random' needs ToTensor's float tensors");
    for (double v : erasing.value) {
      if (!(v >= 0 && v <= 255)) params.fail("value", "must lie in [0, 255] for uint8 tensors");
    }
  }
  tensor_stage_->erasing.emplace_back(std::move(erasing), false);
}

CompiledPipeline::~CompiledPipeline() = default;

RegionPlanner CompiledPipeline::region_planner(const SampleRng& rng) const {
  if (image_ops_.empty()) return {};
  const ImageOp* first = image_ops_.front().get();
  return [first, rng](int height, int width, RegionPlan& plan) {
    SampleRng copy = rng;
    return first->plan_region(height, width, copy, plan);
  };
}

void CompiledPipeline::run(Image& image, Image& scratch, SampleRng& rng,
                           void* destination) const {
  for (const auto& op : image_ops_) op->apply(image, scratch, rng);
  if (image.height != shape_.height || image.width != shape_.width ||
      image.channels != shape_.channels) {
    throw Error("ringloader: pipeline produced " + std::to_string(image.height) + "x" +
                std::to_string(image.width) + "x" + std::to_string(image.channels) +
                " but the batch holds " + std::to_string(shape_.height) + "x" +
                std::to_string(shape_.width) + "x" + std::to_string(shape_.channels));
  }
  // The fused flip draws where the flip op would: after every image op.
  const double flip_p = tensor_stage_->fused_flip_p;
  tensor_stage_->writer->write(image, destination, flip_p >= 0 && rng.bernoulli(flip_p));
  for (const auto& eraser : tensor_stage_->erasers) eraser.apply(destination, rng);
}

}  // namespace transforms

// --- the public Pipeline ---------------------------------------------------

nlohmann::json Pipeline::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const Op& op : ops_) {
    nlohmann::json entry = op.params.is_object() ? op.params : nlohmann::json::object();
    entry["op"] = op.name;
    out.push_back(std::move(entry));
  }
  if (mode_ == PipelineMode::kExact) return out;
  return {{"mode", "fast"}, {"ops", std::move(out)}};
}

namespace {

// {"mode": "exact" | "fast", "ops": [...]}: the mode, with `ops` returned.
PipelineMode read_mode(const nlohmann::json& description, const nlohmann::json*& ops) {
  for (const auto& [key, value] : description.items()) {
    if (key != "mode" && key != "ops") {
      throw OptionError("ringloader: pipeline key '" + key +
                        "' is not supported (a pipeline object has \"mode\" and \"ops\")");
    }
  }
  if (!description.contains("ops")) {
    throw OptionError("ringloader: a pipeline object needs \"ops\" (the list of ops)");
  }
  ops = &description["ops"];
  const nlohmann::json mode = description.value("mode", nlohmann::json("exact"));
  if (mode == "exact") return PipelineMode::kExact;
  if (mode == "fast") return PipelineMode::kFast;
  throw OptionError("ringloader: pipeline mode " + mode.dump() +
                    " is not supported; use \"exact\" (the default) or \"fast\"");
}

}  // namespace

Pipeline Pipeline::from_json(const nlohmann::json& description) {
  const nlohmann::json* ops = &description;
  PipelineMode mode = PipelineMode::kExact;
  // An object with "op" is one op, not a pipeline: refused below as before.
  if (description.is_object() && !description.contains("op")) {
    mode = read_mode(description, ops);
  }
  if (!ops->is_array()) {
    throw OptionError("ringloader: a pipeline is a JSON array of ops, got " +
                      ops->dump().substr(0, 80));
  }
  Pipeline pipeline;
  pipeline.set_mode(mode);
  for (size_t i = 0; i < ops->size(); ++i) {
    const auto& entry = (*ops)[i];
    if (!entry.is_object() || !entry.contains("op") || !entry["op"].is_string()) {
      throw OptionError("ringloader: pipeline op " + std::to_string(i) +
                        " needs an \"op\" name, got " + entry.dump().substr(0, 80));
    }
    Op op{entry["op"].get<std::string>(), entry};
    op.params.erase("op");
    pipeline.add(std::move(op));
  }
  return pipeline;
}

SampleShape Pipeline::output_shape(ColorMode mode, int height, int width) const {
  return transforms::CompiledPipeline(*this, mode, height, width).output_shape();
}

// --- builders: torchvision's names and defaults ------------------------------

Op Resize(std::vector<int> size, Interpolation interpolation, bool antialias) {
  return {"Resize", {{"size", size}, {"interpolation", name_of(interpolation)},
                     {"antialias", antialias}}};
}
Op CenterCrop(std::vector<int> size) { return {"CenterCrop", {{"size", size}}}; }
Op RandomCrop(std::vector<int> size, std::vector<int> padding, bool pad_if_needed,
              std::vector<int> fill, PaddingMode padding_mode) {
  return {"RandomCrop", {{"size", size}, {"padding", padding},
                         {"pad_if_needed", pad_if_needed}, {"fill", fill},
                         {"padding_mode", name_of(padding_mode)}}};
}
Op RandomResizedCrop(std::vector<int> size, std::pair<double, double> scale,
                     std::pair<double, double> ratio, Interpolation interpolation) {
  return {"RandomResizedCrop", {{"size", size}, {"scale", {scale.first, scale.second}},
                                {"ratio", {ratio.first, ratio.second}},
                                {"interpolation", name_of(interpolation)}}};
}
Op RandomHorizontalFlip(double p) { return {"RandomHorizontalFlip", {{"p", p}}}; }
Op RandomVerticalFlip(double p) { return {"RandomVerticalFlip", {{"p", p}}}; }
Op ToTensor() { return {"ToTensor", nlohmann::json::object()}; }
Op PILToTensor() { return {"PILToTensor", nlohmann::json::object()}; }
Op Normalize(std::vector<double> mean, std::vector<double> std) {
  return {"Normalize", {{"mean", mean}, {"std", std}}};
}
Op ToDtype(DType dtype, bool scale) {
  if (dtype != DType::kFloat32 && dtype != DType::kUInt8) {
    throw OptionError("ringloader: ToDtype takes kFloat32 or kUInt8");
  }
  return {"ToDtype", {{"dtype", dtype == DType::kFloat32 ? "float32" : "uint8"},
                      {"scale", scale}}};
}

namespace {
nlohmann::json ops_json(const std::vector<Op>& ops) {
  Pipeline pipeline;
  for (const Op& op : ops) pipeline.add(op);
  return pipeline.to_json();
}
}  // namespace

Op RandomApply(std::vector<Op> ops, double p) {
  return {"RandomApply", {{"transforms", ops_json(ops)}, {"p", p}}};
}
Op RandomChoice(std::vector<Op> ops, std::vector<double> weights) {
  nlohmann::json params = {{"transforms", ops_json(ops)}};
  params["p"] = weights.empty() ? nlohmann::json(nullptr) : nlohmann::json(weights);
  return {"RandomChoice", std::move(params)};
}
Op RandomOrder(std::vector<Op> ops) { return {"RandomOrder", {{"transforms", ops_json(ops)}}}; }

namespace {
nlohmann::json pair_json(std::pair<double, double> v) { return {v.first, v.second}; }
// torchvision's None for an empty list.
nlohmann::json or_null(const std::vector<double>& v) {
  return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v);
}
}  // namespace

Op ColorJitter(double brightness, double contrast, double saturation, double hue) {
  return {"ColorJitter", {{"brightness", brightness}, {"contrast", contrast},
                          {"saturation", saturation}, {"hue", hue}}};
}
Op ColorJitter(std::pair<double, double> brightness, std::pair<double, double> contrast,
               std::pair<double, double> saturation, std::pair<double, double> hue) {
  return {"ColorJitter", {{"brightness", pair_json(brightness)},
                          {"contrast", pair_json(contrast)},
                          {"saturation", pair_json(saturation)}, {"hue", pair_json(hue)}}};
}
Op Grayscale(int num_output_channels) {
  return {"Grayscale", {{"num_output_channels", num_output_channels}}};
}
Op RandomGrayscale(double p) { return {"RandomGrayscale", {{"p", p}}}; }
Op GaussianBlur(std::vector<int> kernel_size, std::pair<double, double> sigma) {
  return {"GaussianBlur", {{"kernel_size", kernel_size}, {"sigma", pair_json(sigma)}}};
}
Op RandomRotation(std::pair<double, double> degrees, Interpolation interpolation,
                  bool expand, std::vector<double> center, std::vector<int> fill) {
  return {"RandomRotation", {{"degrees", pair_json(degrees)},
                             {"interpolation", name_of(interpolation)}, {"expand", expand},
                             {"center", or_null(center)}, {"fill", fill}}};
}
Op RandomAffine(std::pair<double, double> degrees, std::vector<double> translate,
                std::vector<double> scale, std::vector<double> shear,
                Interpolation interpolation, std::vector<int> fill,
                std::vector<double> center) {
  return {"RandomAffine", {{"degrees", pair_json(degrees)}, {"translate", or_null(translate)},
                           {"scale", or_null(scale)}, {"shear", or_null(shear)},
                           {"interpolation", name_of(interpolation)}, {"fill", fill},
                           {"center", or_null(center)}}};
}
Op RandomErasing(double p, std::pair<double, double> scale, std::pair<double, double> ratio,
                 std::vector<double> value) {
  return {"RandomErasing", {{"p", p}, {"scale", pair_json(scale)},
                            {"ratio", pair_json(ratio)}, {"value", value}}};
}
Op RandomErasingNoise(double p, std::pair<double, double> scale,
                      std::pair<double, double> ratio) {
  return {"RandomErasing", {{"p", p}, {"scale", pair_json(scale)},
                            {"ratio", pair_json(ratio)}, {"value", "random"}}};
}

}  // namespace ringloader
