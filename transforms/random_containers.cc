// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/random_containers.h"

#include <algorithm>
#include <numeric>

#include "ringloader/errors.h"
#include "transforms/op_params.h"

namespace ringloader::transforms {
namespace {

using Ops = std::vector<std::unique_ptr<ImageOp>>;

std::pair<int, int> run_sizes(const Ops& ops, const std::vector<size_t>& order, int height,
                              int width) {
  for (size_t i : order) std::tie(height, width) = ops[i]->output_size(height, width);
  return {height, width};
}

int run_channels(const Ops& ops, int channels) {
  for (const auto& op : ops) channels = op->output_channels(channels);
  return channels;
}

std::vector<size_t> identity(size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// Every ordering the container may run: once, or each permutation (RandomOrder).
template <typename Visit>
void each_order(size_t n, bool permuted, Visit visit) {
  std::vector<size_t> order = identity(n);
  do {
    visit(order);
  } while (permuted && std::next_permutation(order.begin(), order.end()));
}

class RandomContainer final : public ImageOp {
 public:
  enum class Kind { kApply, kChoice, kOrder };

  RandomContainer(Kind kind, Ops ops, double p, std::vector<double> weights)
      : kind_(kind), ops_(std::move(ops)), p_(p), cumulative_(std::move(weights)) {
    std::partial_sum(cumulative_.begin(), cumulative_.end(), cumulative_.begin());
  }

  void apply(Image& in, Image& out, SampleRng& rng) const override {
    switch (kind_) {
      case Kind::kApply:
        if (!rng.bernoulli(p_)) return;
        for (const auto& op : ops_) op->apply(in, out, rng);
        return;
      case Kind::kChoice:
        ops_[pick(rng)]->apply(in, out, rng);
        return;
      case Kind::kOrder:
        for (size_t i : shuffled(rng)) ops_[i]->apply(in, out, rng);
        return;
    }
  }

  // The size every draw gives, or 0 (varies) when draws disagree.
  std::pair<int, int> output_size(int height, int width) const override {
    std::vector<std::pair<int, int>> outcomes;
    if (kind_ == Kind::kChoice) {
      for (size_t i = 0; i < ops_.size(); ++i) {
        outcomes.push_back(ops_[i]->output_size(height, width));
      }
    } else {
      each_order(ops_.size(), kind_ == Kind::kOrder && ops_.size() <= kMaxPermuted,
                 [&](const std::vector<size_t>& order) {
                   outcomes.push_back(run_sizes(ops_, order, height, width));
                 });
      if (kind_ == Kind::kOrder && ops_.size() > kMaxPermuted) outcomes.push_back({0, 0});
      if (kind_ == Kind::kApply && p_ < 1) outcomes.push_back({height, width});
    }
    for (const auto& outcome : outcomes) {
      if (outcome != outcomes.front()) return {0, 0};
    }
    return outcomes.front();
  }

  int output_channels(int channels) const override {
    if (kind_ == Kind::kChoice) return ops_.front()->output_channels(channels);
    return run_channels(ops_, channels);
  }

  static constexpr size_t kMaxPermuted = 6;

 private:
  size_t pick(SampleRng& rng) const {
    const double u = rng.uniform() * cumulative_.back();
    const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
    return std::min(static_cast<size_t>(it - cumulative_.begin()), ops_.size() - 1);
  }

  // Fisher-Yates: every permutation equally likely, as torch.randperm.
  std::vector<size_t> shuffled(SampleRng& rng) const {
    std::vector<size_t> order = identity(ops_.size());
    for (size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[static_cast<size_t>(rng.integer(0, i - 1))]);
    }
    return order;
  }

  Kind kind_;
  Ops ops_;
  double p_;
  std::vector<double> cumulative_;
};

// Containers nest; a bound keeps a hostile pipeline from exhausting the
// stack of every worker that builds it.
constexpr int kMaxNesting = 16;
thread_local int nesting = 0;

struct NestingGuard {
  explicit NestingGuard(OpParams& params) {
    if (++nesting > kMaxNesting) {
      --nesting;
      params.fail("transforms", "nests containers deeper than " + std::to_string(kMaxNesting));
    }
  }
  ~NestingGuard() { --nesting; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;
};

Ops nested_ops(OpParams& params, const ImageOpBuilder& build) {
  NestingGuard guard(params);
  if (!params.present("transforms")) params.fail("transforms", "is required");
  const nlohmann::json& list = params.op().params.at("transforms");
  if (!list.is_array() || list.empty()) {
    params.fail("transforms", "must be a non-empty list of ops");
  }
  Ops ops;
  const Pipeline nested = Pipeline::from_json(list);
  for (const Op& op : nested.ops()) {
    ops.push_back(build(op, params.position()));
  }
  return ops;
}

// Output channels must not depend on the draws (the batch has one shape).
void check_channels(OpParams& params, const Ops& ops, RandomContainer::Kind kind, double p) {
  for (int channels : {1, 3}) {
    std::vector<int> outcomes;
    if (kind == RandomContainer::Kind::kChoice) {
      for (const auto& op : ops) outcomes.push_back(op->output_channels(channels));
    } else {
      outcomes.push_back(run_channels(ops, channels));
      if (kind == RandomContainer::Kind::kApply && p < 1) outcomes.push_back(channels);
    }
    for (int outcome : outcomes) {
      if (outcome != outcomes.front()) {
        params.fail("transforms", "change the channel count on some draws only");
      }
    }
  }
}

}  // namespace

std::unique_ptr<ImageOp> make_random_container(OpParams& params, const ImageOpBuilder& build) {
  using Kind = RandomContainer::Kind;
  const std::string& name = params.op().name;
  const Kind kind = name == "RandomApply"    ? Kind::kApply
                    : name == "RandomChoice" ? Kind::kChoice
                                             : Kind::kOrder;
  Ops ops = nested_ops(params, build);
  double p = 1;
  std::vector<double> weights(ops.size(), 1.0);
  if (kind == Kind::kApply) p = params.number("p");
  if (kind == Kind::kChoice && params.has("p")) {
    weights = params.numbers("p", {ops.size()});
    double total = 0;
    for (double w : weights) {
      if (!(w >= 0)) params.fail("p", "must hold weights >= 0");
      total += w;
    }
    if (!(total > 0)) params.fail("p", "must have a positive sum");
  } else if (kind == Kind::kChoice) {
    params.present("p");
  }
  check_channels(params, ops, kind, p);
  return std::make_unique<RandomContainer>(kind, std::move(ops), p, std::move(weights));
}

}  // namespace ringloader::transforms
