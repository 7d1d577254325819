// SPDX-License-Identifier: BSD-3-Clause
// AutoAugment, RandAugment, TrivialAugmentWide and AugMix: torchvision
// 0.14's parameters, random draws and forward passes over the ops of
// augment_ops.h. Draws come from the sample's stream with torchvision's
// distributions (see draw_augment); the pixels are those of torchvision
// given the same draws: PIL's for the first three, torch's tensor ops for
// AugMix (which converts PIL images to tensors first).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringloader/random.h"
#include "transforms/augment_ops.h"
#include "transforms/compiled_pipeline.h"
#include "transforms/op_params.h"

namespace ringloader::transforms {

struct AugmentParams {
  AugmentFamily family = AugmentFamily::kTrivialAugmentWide;
  std::string policy = "imagenet";  // AutoAugment
  int num_ops = 2, magnitude = 9;   // RandAugment
  int num_magnitude_bins = 31;      // RandAugment, TrivialAugmentWide
  int severity = 3, mixture_width = 3, chain_depth = -1;  // AugMix
  double alpha = 1.0;
  bool all_ops = true;
  AugmentWarp warp;                 // PIL's interpolation and int() fill
  std::vector<double> fill;         // as given; empty: None (AugMix's tensors)
};

// What one sample draws.
struct AugmentDraw {
  std::vector<AugmentStep> steps;                // the ops, in order
  std::vector<std::vector<AugmentStep>> chains;  // AugMix: one list per chain
  std::array<float, 2> beta{1, 0};               // AugMix: m (original, augmented)
  std::vector<float> weights;                    // AugMix: combined weights per chain
};

// The draws of the forward pass for an image of height x width, in
// torchvision's order and with its distributions (randint(n) is
// rng.integer(0, n - 1), torch.rand a float32 with 24 random bits):
//  AutoAugment: policy index, two probabilities, two signs (0: negative);
//  RandAugment: per op, the op index, then a sign when the op is signed;
//  TrivialAugmentWide: the op index, a magnitude bin when the op has
//    magnitudes, a sign when signed;
//  AugMix: Dirichlet([alpha, alpha]), Dirichlet([alpha] * mixture_width)
//    (gamma variates, Marsaglia-Tsang), then per chain its depth when
//    chain_depth <= 0 (randint(1, 4)) and per op as TrivialAugmentWide with
//    magnitude bins below severity.
AugmentDraw draw_augment(const AugmentParams& params, int height, int width, SampleRng& rng);
// The forward pass for drawn values; `scratch` is reused.
void apply_augment(const AugmentParams& params, const AugmentDraw& draw, Image& image,
                   Image& scratch);
// {"steps": [[op, magnitude], ...]} and, for AugMix, "chains", "beta", "weights".
nlohmann::json augment_draw_json(const AugmentDraw& draw);

// The parameters read and checked as torchvision's constructors (and first
// forward) would, errors naming op and parameter.
AugmentParams augment_params(OpParams& params, AugmentFamily family);
std::unique_ptr<ImageOp> make_augment(AugmentParams params);

// AutoAugment's sub-policies: two (op, probability, magnitude bin) each;
// bin -1 is torchvision's None.
struct PolicyOp {
  AugmentOp op;
  float p;
  int bin;
};
using SubPolicy = std::array<PolicyOp, 2>;
// "imagenet", "cifar10" or "svhn"; Error for another name.
const std::vector<SubPolicy>& auto_augment_policy(const std::string& name);

}  // namespace ringloader::transforms
