// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/epoch_order.h"

#include "loader/trainer/distributed.h"
#include "ringloader/errors.h"

namespace ringloader::trainer {

std::vector<sampler::ElasticStage> to_stages(const std::vector<ElasticStage>& stages) {
  std::vector<sampler::ElasticStage> out;
  for (const ElasticStage& stage : stages) out.push_back({stage.world_size, stage.batches});
  return out;
}

std::vector<ElasticStage> from_stages(const std::vector<sampler::ElasticStage>& stages) {
  std::vector<ElasticStage> out;
  for (const auto& stage : stages) out.push_back({stage.world_size, stage.batches});
  return out;
}

std::vector<int64_t> rank_epoch_order(const sampler::Sampler& base, int64_t epoch,
                                      const std::vector<sampler::ElasticStage>& history,
                                      int64_t rank, int64_t world) {
  sampler::SamplerOptions options = base.options();
  options.rank = rank;
  options.world_size = world;
  const sampler::Sampler sampler(options);
  if (history.empty()) return sampler.order(static_cast<uint64_t>(epoch));
  std::vector<int64_t> global;
  sampler.global_order(static_cast<uint64_t>(epoch), global);
  return sampler::elastic_order(global, history, rank, world, sampler.layout(),
                                options.batch_size, options.drop_last);
}

}  // namespace ringloader::trainer

namespace ringloader {

std::vector<int64_t> epoch_order(int64_t dataset_size, const LoaderOptions& options,
                                 int64_t epoch) {
  if (epoch < 0) throw OptionError("ringloader: epoch must be >= 0");
  LoaderOptions resolved = trainer::resolve_distributed(options);
  sampler::Sampler sampler(trainer::sampler_options(dataset_size, resolved));
  return sampler.order(static_cast<uint64_t>(epoch));
}

std::vector<int64_t> epoch_order(int64_t dataset_size, const LoaderOptions& options,
                                 int64_t epoch, const std::vector<MixPart>& mix,
                                 const std::vector<ElasticStage>& history) {
  if (epoch < 0) throw OptionError("ringloader: epoch must be >= 0");
  const LoaderOptions resolved = trainer::resolve_distributed(options);
  sampler::SamplerOptions sampler_options =
      trainer::sampler_options(dataset_size, resolved);
  sampler_options.mix = trainer::mix_streams(mix, {});
  const sampler::Sampler sampler(sampler_options);
  return trainer::rank_epoch_order(sampler, epoch, trainer::to_stages(history),
                                   resolved.rank, resolved.world_size);
}

}  // namespace ringloader
