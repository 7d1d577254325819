// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/auto_augment.h"

#include <cmath>
#include <utility>

#include "ringloader/errors.h"
#include "transforms/augmix.h"

namespace ringloader::transforms {
namespace {

// randint(n): uniform over [0, n).
int randint(SampleRng& rng, int n) { return static_cast<int>(rng.integer(0, n - 1)); }

// torch.rand on a float32 tensor: 24 random bits.
float rand_float32(SampleRng& rng) {
  return static_cast<float>(rng.next_u32() >> 8) * (1.0f / 16777216.0f);
}

// One op of an _augmentation_space drawn as RandAugment, TrivialAugmentWide
// and AugMix draw it: the op index; the magnitude (`bin` >= 0: that bin;
// otherwise randint(`bins`)) when the op has magnitudes; a sign when it is
// signed (randint(2) == 1 negates).
AugmentStep draw_step(const AugmentSpace& space, int bin, int bins, SampleRng& rng) {
  const AugmentSpaceEntry& entry = space[randint(rng, static_cast<int>(space.size()))];
  AugmentStep step{entry.op, 0.0};
  if (!entry.magnitudes.empty()) {
    step.magnitude = entry.magnitudes[bin >= 0 ? bin : randint(rng, bins)];
  }
  if (entry.is_signed && randint(rng, 2) == 1) step.magnitude = -step.magnitude;
  return step;
}

const AugmentSpaceEntry& entry_for(const AugmentSpace& space, AugmentOp op) {
  for (const auto& entry : space) {
    if (entry.op == op) return entry;
  }
  throw Error(std::string("ringloader: AutoAugment's space has no ") + augment_op_name(op));
}

std::vector<AugmentStep> draw_auto_augment(const AugmentParams& params, int height,
                                           int width, SampleRng& rng) {
  const auto& policies = auto_augment_policy(params.policy);
  const SubPolicy& policy = policies[randint(rng, static_cast<int>(policies.size()))];
  const float probs[2] = {rand_float32(rng), rand_float32(rng)};
  const int signs[2] = {randint(rng, 2), randint(rng, 2)};
  const AugmentSpace space = augmentation_space(AugmentFamily::kAutoAugment, 10, height, width);
  std::vector<AugmentStep> steps;
  for (int i = 0; i < 2; ++i) {
    if (!(probs[i] <= policy[i].p)) continue;
    const AugmentSpaceEntry& entry = entry_for(space, policy[i].op);
    AugmentStep step{policy[i].op, policy[i].bin >= 0 ? entry.magnitudes[policy[i].bin] : 0.0};
    if (entry.is_signed && signs[i] == 0) step.magnitude = -step.magnitude;
    steps.push_back(step);
  }
  return steps;
}

// A standard normal (Box-Muller on two uniforms in (0, 1]).
double normal(SampleRng& rng) {
  const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

// Gamma(alpha, 1) by Marsaglia and Tsang, boosted below alpha = 1, as
// torch's sample_gamma draws it.
double gamma_variate(double alpha, SampleRng& rng) {
  double boost = 1.0;
  if (alpha < 1.0) {
    boost = std::pow(1.0 - rng.uniform(), 1.0 / alpha);
    alpha += 1.0;
  }
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - rng.uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * boost;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * boost;
  }
}

// torch._sample_dirichlet for one row of `count` equal alphas, as float32.
std::vector<float> dirichlet(double alpha, int count, SampleRng& rng) {
  std::vector<double> gammas(count);
  double sum = 0;
  for (double& g : gammas) sum += (g = gamma_variate(alpha, rng));
  std::vector<float> out;
  for (double g : gammas) out.push_back(static_cast<float>(sum > 0 ? g / sum : 1.0 / count));
  return out;
}

void draw_augmix(const AugmentParams& params, int height, int width, SampleRng& rng,
                 AugmentDraw& draw) {
  const AugmentSpace space =
      augmentation_space(AugmentFamily::kAugMix, 10, height, width, params.all_ops);
  const std::vector<float> m = dirichlet(params.alpha, 2, rng);
  draw.beta = {m[0], m[1]};
  for (float w : dirichlet(params.alpha, params.mixture_width, rng)) {
    draw.weights.push_back(w * m[1]);  // float32, as torch multiplies
  }
  for (int i = 0; i < params.mixture_width; ++i) {
    const int depth = params.chain_depth > 0 ? params.chain_depth
                                             : static_cast<int>(rng.integer(1, 3));
    std::vector<AugmentStep> chain;
    for (int d = 0; d < depth; ++d) chain.push_back(draw_step(space, -1, params.severity, rng));
    draw.chains.push_back(std::move(chain));
  }
}

class AutoAugmentOp final : public ImageOp {
 public:
  explicit AutoAugmentOp(AugmentParams params) : params_(std::move(params)) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    apply_augment(params_, draw_augment(params_, in.height, in.width, rng), in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    return {height, width};
  }

 private:
  AugmentParams params_;
};

// An int parameter held in a JSON number.
int integer(OpParams& p, const std::string& key) {
  const double v = p.number(key);
  if (v != std::floor(v)) p.fail(key, "must be an integer");
  return static_cast<int>(v);
}

}  // namespace

AugmentDraw draw_augment(const AugmentParams& params, int height, int width,
                         SampleRng& rng) {
  AugmentDraw draw;
  switch (params.family) {
    case AugmentFamily::kAutoAugment:
      draw.steps = draw_auto_augment(params, height, width, rng);
      break;
    case AugmentFamily::kRandAugment: {
      const AugmentSpace space = augmentation_space(
          AugmentFamily::kRandAugment, params.num_magnitude_bins, height, width);
      for (int i = 0; i < params.num_ops; ++i) {
        draw.steps.push_back(draw_step(space, params.magnitude, 0, rng));
      }
      break;
    }
    case AugmentFamily::kTrivialAugmentWide: {
      const AugmentSpace space = augmentation_space(
          AugmentFamily::kTrivialAugmentWide, params.num_magnitude_bins, height, width);
      draw.steps.push_back(draw_step(space, -1, params.num_magnitude_bins, rng));
      break;
    }
    case AugmentFamily::kAugMix:
      draw_augmix(params, height, width, rng, draw);
      break;
  }
  return draw;
}

void apply_augment(const AugmentParams& params, const AugmentDraw& draw, Image& image,
                   Image& scratch) {
  if (params.family == AugmentFamily::kAugMix) {
    augmix(params, draw, image, scratch);
    return;
  }
  for (const AugmentStep& step : draw.steps) apply_augment_op(step, params.warp, image, scratch);
}

nlohmann::json augment_draw_json(const AugmentDraw& draw) {
  auto steps = [](const std::vector<AugmentStep>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : list) out.push_back({augment_op_name(s.op), s.magnitude});
    return out;
  };
  nlohmann::json out = {{"steps", steps(draw.steps)}};
  if (!draw.chains.empty()) {
    out["chains"] = nlohmann::json::array();
    for (const auto& chain : draw.chains) out["chains"].push_back(steps(chain));
    out["beta"] = {draw.beta[0], draw.beta[1]};
    out["weights"] = draw.weights;
  }
  return out;
}

AugmentParams augment_params(OpParams& p, AugmentFamily family) {
  AugmentParams out;
  out.family = family;
  switch (family) {
    case AugmentFamily::kAutoAugment: out.policy = p.choice("policy"); break;
    case AugmentFamily::kRandAugment:
      out.num_ops = integer(p, "num_ops");
      out.magnitude = integer(p, "magnitude");
      out.num_magnitude_bins = integer(p, "num_magnitude_bins");
      if (out.magnitude >= out.num_magnitude_bins) {
        p.fail("magnitude", "must be below num_magnitude_bins (it indexes the bins)");
      }
      break;
    case AugmentFamily::kTrivialAugmentWide:
      out.num_magnitude_bins = integer(p, "num_magnitude_bins");
      break;
    case AugmentFamily::kAugMix:
      out.severity = integer(p, "severity");
      out.mixture_width = integer(p, "mixture_width");
      out.chain_depth = integer(p, "chain_depth");
      out.alpha = p.number("alpha");
      if (!(out.alpha > 0)) p.fail("alpha", "must be positive (Dirichlet concentration)");
      out.all_ops = p.boolean("all_ops");
      break;
  }
  const Interpolation mode = interpolation_from_name(p.choice("interpolation"));
  out.warp.filter = mode == Interpolation::kBilinear ? WarpFilter::kBilinear
                    : mode == Interpolation::kBicubic ? WarpFilter::kBicubic
                                                      : WarpFilter::kNearest;
  if (family == AugmentFamily::kAugMix && mode == Interpolation::kBicubic) {
    p.fail("interpolation", "must be nearest or bilinear (AugMix warps tensors)");
  }
  if (p.present("fill")) {
    out.fill = p.numbers("fill", {1, 3});
    out.warp.fill.clear();
    for (double v : out.fill) {
      if (!int_fits_uint8(v)) p.fail("fill", "values must be in [0, 255]");
      out.warp.fill.push_back(static_cast<int>(v));  // _parse_fill's int()
    }
  }
  return out;
}

std::unique_ptr<ImageOp> make_augment(AugmentParams params) {
  return std::make_unique<AutoAugmentOp>(std::move(params));
}

}  // namespace ringloader::transforms
