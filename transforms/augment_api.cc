// SPDX-License-Identifier: BSD-3-Clause
// The public face of the AutoAugment family: builders and augment_draws.
#include "ringloader/errors.h"
#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "transforms/auto_augment.h"
#include "transforms/op_params.h"
#include "transforms/timm_augment.h"

namespace ringloader {
namespace {

nlohmann::json fill_json(const std::vector<double>& fill) {
  return fill.empty() ? nlohmann::json(nullptr) : nlohmann::json(fill);
}

// [[name, magnitude, arg, filter], ...] per sample: what timm's ops receive.
nlohmann::json timm_augment_draws(const Op& op, uint64_t seed, uint64_t epoch,
                                  uint64_t first_index, uint64_t count) {
  transforms::OpParams params(op, 0);
  const transforms::TimmAugmentParams parsed = transforms::timm_augment_params(params);
  params.finish();
  nlohmann::json out = nlohmann::json::array();
  for (uint64_t i = 0; i < count; ++i) {
    SampleRng rng(seed, epoch, first_index + i);
    out.push_back(transforms::timm_draw_json(transforms::draw_timm_augment(parsed, rng)));
  }
  return out;
}

}  // namespace

Op AutoAugment(std::string policy, Interpolation interpolation, std::vector<double> fill) {
  return {"AutoAugment", {{"policy", policy}, {"interpolation", name_of(interpolation)},
                          {"fill", fill_json(fill)}}};
}

Op RandAugment(int num_ops, int magnitude, int num_magnitude_bins,
               Interpolation interpolation, std::vector<double> fill) {
  return {"RandAugment", {{"num_ops", num_ops}, {"magnitude", magnitude},
                          {"num_magnitude_bins", num_magnitude_bins},
                          {"interpolation", name_of(interpolation)},
                          {"fill", fill_json(fill)}}};
}

Op TrivialAugmentWide(int num_magnitude_bins, Interpolation interpolation,
                      std::vector<double> fill) {
  return {"TrivialAugmentWide", {{"num_magnitude_bins", num_magnitude_bins},
                                 {"interpolation", name_of(interpolation)},
                                 {"fill", fill_json(fill)}}};
}

Op AugMix(int severity, int mixture_width, int chain_depth, double alpha, bool all_ops,
          Interpolation interpolation, std::vector<double> fill) {
  return {"AugMix", {{"severity", severity}, {"mixture_width", mixture_width},
                     {"chain_depth", chain_depth}, {"alpha", alpha}, {"all_ops", all_ops},
                     {"interpolation", name_of(interpolation)}, {"fill", fill_json(fill)}}};
}

nlohmann::json augment_draws(const Op& op, int height, int width, uint64_t seed,
                             uint64_t epoch, uint64_t first_index, uint64_t count) {
  using transforms::AugmentFamily;
  static const std::pair<const char*, AugmentFamily> kFamilies[] = {
      {"AutoAugment", AugmentFamily::kAutoAugment},
      {"RandAugment", AugmentFamily::kRandAugment},
      {"TrivialAugmentWide", AugmentFamily::kTrivialAugmentWide},
      {"AugMix", AugmentFamily::kAugMix}};
  if (op.name == "TimmRandAugment") return timm_augment_draws(op, seed, epoch, first_index, count);
  const AugmentFamily* family = nullptr;
  for (const auto& [name, value] : kFamilies) {
    if (op.name == name) family = &value;
  }
  if (!family) {
    throw OptionError("ringloader: augment_draws takes AutoAugment, RandAugment, "
                      "TrivialAugmentWide, AugMix or TimmRandAugment, not " + op.name);
  }
  if (height <= 0 || width <= 0) throw OptionError("ringloader: augment_draws needs a size");
  transforms::OpParams params(op, 0);
  const transforms::AugmentParams parsed = transforms::augment_params(params, *family);
  params.finish();
  nlohmann::json out = nlohmann::json::array();
  for (uint64_t i = 0; i < count; ++i) {
    SampleRng rng(seed, epoch, first_index + i);
    out.push_back(augment_draw_json(transforms::draw_augment(parsed, height, width, rng)));
  }
  return out;
}

}  // namespace ringloader
