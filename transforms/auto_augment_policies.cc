// SPDX-License-Identifier: BSD-3-Clause
// AutoAugment's learned sub-policies, as torchvision 0.14's
// AutoAugment._get_policies lists them (the order is the draw's index).
#include <map>

#include "ringloader/errors.h"
#include "transforms/auto_augment.h"

namespace ringloader::transforms {
namespace {

using O = AugmentOp;
constexpr int kNone = -1;

const std::vector<SubPolicy> kImageNet = {
    {{{O::kPosterize, 0.4f, 8}, {O::kRotate, 0.6f, 9}}},
    {{{O::kSolarize, 0.6f, 5}, {O::kAutoContrast, 0.6f, kNone}}},
    {{{O::kEqualize, 0.8f, kNone}, {O::kEqualize, 0.6f, kNone}}},
    {{{O::kPosterize, 0.6f, 7}, {O::kPosterize, 0.6f, 6}}},
    {{{O::kEqualize, 0.4f, kNone}, {O::kSolarize, 0.2f, 4}}},
    {{{O::kEqualize, 0.4f, kNone}, {O::kRotate, 0.8f, 8}}},
    {{{O::kSolarize, 0.6f, 3}, {O::kEqualize, 0.6f, kNone}}},
    {{{O::kPosterize, 0.8f, 5}, {O::kEqualize, 1.0f, kNone}}},
    {{{O::kRotate, 0.2f, 3}, {O::kSolarize, 0.6f, 8}}},
    {{{O::kEqualize, 0.6f, kNone}, {O::kPosterize, 0.4f, 6}}},
    {{{O::kRotate, 0.8f, 8}, {O::kColor, 0.4f, 0}}},
    {{{O::kRotate, 0.4f, 9}, {O::kEqualize, 0.6f, kNone}}},
    {{{O::kEqualize, 0.0f, kNone}, {O::kEqualize, 0.8f, kNone}}},
    {{{O::kInvert, 0.6f, kNone}, {O::kEqualize, 1.0f, kNone}}},
    {{{O::kColor, 0.6f, 4}, {O::kContrast, 1.0f, 8}}},
    {{{O::kRotate, 0.8f, 8}, {O::kColor, 1.0f, 2}}},
    {{{O::kColor, 0.8f, 8}, {O::kSolarize, 0.8f, 7}}},
    {{{O::kSharpness, 0.4f, 7}, {O::kInvert, 0.6f, kNone}}},
    {{{O::kShearX, 0.6f, 5}, {O::kEqualize, 1.0f, kNone}}},
    {{{O::kColor, 0.4f, 0}, {O::kEqualize, 0.6f, kNone}}},
    {{{O::kEqualize, 0.4f, kNone}, {O::kSolarize, 0.2f, 4}}},
    {{{O::kSolarize, 0.6f, 5}, {O::kAutoContrast, 0.6f, kNone}}},
    {{{O::kInvert, 0.6f, kNone}, {O::kEqualize, 1.0f, kNone}}},
    {{{O::kColor, 0.6f, 4}, {O::kContrast, 1.0f, 8}}},
    {{{O::kEqualize, 0.8f, kNone}, {O::kEqualize, 0.6f, kNone}}},
};

const std::vector<SubPolicy> kCifar10 = {
    {{{O::kInvert, 0.1f, kNone}, {O::kContrast, 0.2f, 6}}},
    {{{O::kRotate, 0.7f, 2}, {O::kTranslateX, 0.3f, 9}}},
    {{{O::kSharpness, 0.8f, 1}, {O::kSharpness, 0.9f, 3}}},
    {{{O::kShearY, 0.5f, 8}, {O::kTranslateY, 0.7f, 9}}},
    {{{O::kAutoContrast, 0.5f, kNone}, {O::kEqualize, 0.9f, kNone}}},
    {{{O::kShearY, 0.2f, 7}, {O::kPosterize, 0.3f, 7}}},
    {{{O::kColor, 0.4f, 3}, {O::kBrightness, 0.6f, 7}}},
    {{{O::kSharpness, 0.3f, 9}, {O::kBrightness, 0.7f, 9}}},
    {{{O::kEqualize, 0.6f, kNone}, {O::kEqualize, 0.5f, kNone}}},
    {{{O::kContrast, 0.6f, 7}, {O::kSharpness, 0.6f, 5}}},
    {{{O::kColor, 0.7f, 7}, {O::kTranslateX, 0.5f, 8}}},
    {{{O::kEqualize, 0.3f, kNone}, {O::kAutoContrast, 0.4f, kNone}}},
    {{{O::kTranslateY, 0.4f, 3}, {O::kSharpness, 0.2f, 6}}},
    {{{O::kBrightness, 0.9f, 6}, {O::kColor, 0.2f, 8}}},
    {{{O::kSolarize, 0.5f, 2}, {O::kInvert, 0.0f, kNone}}},
    {{{O::kEqualize, 0.2f, kNone}, {O::kAutoContrast, 0.6f, kNone}}},
    {{{O::kEqualize, 0.2f, kNone}, {O::kEqualize, 0.6f, kNone}}},
    {{{O::kColor, 0.9f, 9}, {O::kEqualize, 0.6f, kNone}}},
    {{{O::kAutoContrast, 0.8f, kNone}, {O::kSolarize, 0.2f, 8}}},
    {{{O::kBrightness, 0.1f, 3}, {O::kColor, 0.7f, 0}}},
    {{{O::kSolarize, 0.4f, 5}, {O::kAutoContrast, 0.9f, kNone}}},
    {{{O::kTranslateY, 0.9f, 9}, {O::kTranslateY, 0.7f, 9}}},
    {{{O::kAutoContrast, 0.9f, kNone}, {O::kSolarize, 0.8f, 3}}},
    {{{O::kEqualize, 0.8f, kNone}, {O::kInvert, 0.1f, kNone}}},
    {{{O::kTranslateY, 0.7f, 9}, {O::kAutoContrast, 0.9f, kNone}}},
};

const std::vector<SubPolicy> kSvhn = {
    {{{O::kShearX, 0.9f, 4}, {O::kInvert, 0.2f, kNone}}},
    {{{O::kShearY, 0.9f, 8}, {O::kInvert, 0.7f, kNone}}},
    {{{O::kEqualize, 0.6f, kNone}, {O::kSolarize, 0.6f, 6}}},
    {{{O::kInvert, 0.9f, kNone}, {O::kEqualize, 0.6f, kNone}}},
    {{{O::kEqualize, 0.6f, kNone}, {O::kRotate, 0.9f, 3}}},
    {{{O::kShearX, 0.9f, 4}, {O::kAutoContrast, 0.8f, kNone}}},
    {{{O::kShearY, 0.9f, 8}, {O::kInvert, 0.4f, kNone}}},
    {{{O::kShearY, 0.9f, 5}, {O::kSolarize, 0.2f, 6}}},
    {{{O::kInvert, 0.9f, kNone}, {O::kAutoContrast, 0.8f, kNone}}},
    {{{O::kEqualize, 0.6f, kNone}, {O::kRotate, 0.9f, 3}}},
    {{{O::kShearX, 0.9f, 4}, {O::kSolarize, 0.3f, 3}}},
    {{{O::kShearY, 0.8f, 8}, {O::kInvert, 0.7f, kNone}}},
    {{{O::kEqualize, 0.9f, kNone}, {O::kTranslateY, 0.6f, 6}}},
    {{{O::kInvert, 0.9f, kNone}, {O::kEqualize, 0.6f, kNone}}},
    {{{O::kContrast, 0.3f, 3}, {O::kRotate, 0.8f, 4}}},
    {{{O::kInvert, 0.8f, kNone}, {O::kTranslateY, 0.0f, 2}}},
    {{{O::kShearY, 0.7f, 6}, {O::kSolarize, 0.4f, 8}}},
    {{{O::kInvert, 0.6f, kNone}, {O::kRotate, 0.8f, 4}}},
    {{{O::kShearY, 0.3f, 7}, {O::kTranslateX, 0.9f, 3}}},
    {{{O::kShearX, 0.1f, 6}, {O::kInvert, 0.6f, kNone}}},
    {{{O::kSolarize, 0.7f, 2}, {O::kTranslateY, 0.6f, 7}}},
    {{{O::kShearY, 0.8f, 4}, {O::kInvert, 0.8f, kNone}}},
    {{{O::kShearX, 0.7f, 9}, {O::kTranslateY, 0.8f, 3}}},
    {{{O::kShearY, 0.8f, 5}, {O::kAutoContrast, 0.7f, kNone}}},
    {{{O::kShearX, 0.7f, 2}, {O::kInvert, 0.1f, kNone}}},
};

}  // namespace

const std::vector<SubPolicy>& auto_augment_policy(const std::string& name) {
  static const std::map<std::string, const std::vector<SubPolicy>*> policies = {
      {"imagenet", &kImageNet}, {"cifar10", &kCifar10}, {"svhn", &kSvhn}};
  auto it = policies.find(name);
  if (it == policies.end()) throw Error("ringloader: AutoAugment has no policy '" + name + "'");
  return *it->second;
}

}  // namespace ringloader::transforms
