// SPDX-License-Identifier: BSD-3-Clause
// Mid-epoch resume: a Loader stopped anywhere between batches and a fresh
// Loader restored from its state_dict() deliver, together, exactly the bytes
// of one uninterrupted run (shuffle and random augmentation included).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <numeric>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

constexpr int kEpochs = 3;
constexpr int64_t kBatchesPerEpoch = 5;  // 30 samples, batches of 7 (last 2)

Pipeline augmenting_pipeline() {
  return Pipeline{RandomResizedCrop(16), RandomHorizontalFlip(), ToTensor(),
                  Normalize({0.5, 0.4, 0.3}, {0.2, 0.25, 0.3})};
}

struct Seen {
  int64_t epoch = 0;
  int64_t index = 0;
  std::vector<int64_t> samples;
  torch::Tensor data, target;
};

Seen keep(const Batch& batch) {
  return {batch.epoch, batch.index, batch.sample_indices, batch.data.clone(),
          batch.target.clone()};
}

void expect_same(const std::vector<Seen>& got, const std::vector<Seen>& want,
                 const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].epoch, want[i].epoch) << where << ", batch " << i;
    EXPECT_EQ(got[i].index, want[i].index) << where << ", batch " << i;
    EXPECT_EQ(got[i].samples, want[i].samples) << where << ", batch " << i;
    EXPECT_TRUE(torch::equal(got[i].data, want[i].data)) << where << ", batch " << i;
    EXPECT_TRUE(torch::equal(got[i].target, want[i].target)) << where << ", batch " << i;
  }
}

// Every test's state goes through JSON text, as a checkpoint file would.
LoaderState through_json(const LoaderState& state) {
  return LoaderState::from_json(nlohmann::json::parse(state.to_json().dump()));
}

class Resume : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "images", 3, 10);
    dataset_ = Dataset::image_folder(dir_ / "images");
  }
  LoaderOptions options(int workers) const {
    LoaderOptions out;
    out.batch_size = 7;
    out.num_workers = workers;
    out.shuffle = true;
    out.seed = 1234;
    out.rank = 0;
    out.world_size = 1;
    return out;
  }
  std::vector<Seen> uninterrupted(int workers) {
    Loader loader(dataset_, augmenting_pipeline(), options(workers));
    std::vector<Seen> out;
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      for (Batch& batch : loader) out.push_back(keep(batch));
    }
    return out;
  }
  // Takes `cut` batches of epoch 1 (after a whole epoch 0) and returns the
  // state; `finish_epoch` also runs the iterator to its end.
  LoaderState run_until(int workers, int64_t cut, bool finish_epoch,
                        std::vector<Seen>& seen) {
    Loader loader(dataset_, augmenting_pipeline(), options(workers));
    for (Batch& batch : loader) seen.push_back(keep(batch));
    loader.begin_epoch();
    for (int64_t i = 0; i < cut; ++i) seen.push_back(keep(*loader.next()));
    if (finish_epoch) {
      while (std::optional<Batch> batch = loader.next()) seen.push_back(keep(*batch));
    }
    return through_json(loader.state_dict());
  }
  // A fresh loader from `state`, iterated (no set_epoch) until the run's
  // kEpochs epochs are done.
  void resume_to_end(int workers, const LoaderState& state, std::vector<Seen>& seen) {
    Loader loader(dataset_, augmenting_pipeline(), options(workers));
    loader.load_state_dict(state);
    EXPECT_EQ(through_json(loader.state_dict()).to_json(), state.to_json())
        << "a loaded, not yet started loader reports the state it was given";
    while (loader.state_dict().epoch < kEpochs) {
      for (Batch& batch : loader) seen.push_back(keep(batch));
    }
  }
  testing::TempDir dir_;
  Dataset dataset_;
};

TEST_F(Resume, EveryCutPointGivesTheUninterruptedBytes) {
  const std::vector<Seen> reference = uninterrupted(2);
  ASSERT_EQ(reference.size(), static_cast<size_t>(kEpochs * kBatchesPerEpoch));
  struct Cut { int64_t batches; bool finish; const char* name; };
  for (Cut cut : {Cut{0, false, "start of epoch 1"}, Cut{2, false, "middle"},
                  Cut{kBatchesPerEpoch - 1, false, "before the last batch"},
                  Cut{kBatchesPerEpoch, false, "after the last batch"},
                  Cut{kBatchesPerEpoch, true, "epoch boundary"}}) {
    std::vector<Seen> seen;
    LoaderState state = run_until(2, cut.batches, cut.finish, seen);
    EXPECT_EQ(state.batches_in_epoch, kBatchesPerEpoch);
    EXPECT_EQ(state.epoch, cut.finish ? 2 : 1) << cut.name;
    EXPECT_EQ(state.batches_consumed, cut.finish ? 0 : cut.batches) << cut.name;
    EXPECT_TRUE(state.order.empty()) << "the built-in sampler's order is recomputed";
    resume_to_end(2, state, seen);
    expect_same(seen, reference, cut.name);
  }
}

TEST_F(Resume, WorkerCountMayChangeAcrossTheRestart) {
  const std::vector<Seen> reference = uninterrupted(0);
  std::vector<Seen> seen;
  LoaderState state = run_until(2, 3, false, seen);
  resume_to_end(0, state, seen);
  expect_same(seen, reference, "2 workers, then 0");
}

TEST_F(Resume, SetEpochKeepsTheSavedEpochAndDropsItForAnother) {
  std::vector<Seen> reference = uninterrupted(0);
  std::vector<Seen> seen;
  LoaderState state = run_until(0, 2, false, seen);
  Loader loader(dataset_, augmenting_pipeline(), options(0));
  loader.load_state_dict(state);
  loader.set_epoch(1);  // the training loop's own epoch counter: same epoch
  for (Batch& batch : loader) seen.push_back(keep(batch));
  std::vector<Seen> want(reference.begin(), reference.begin() + 2 * kBatchesPerEpoch);
  expect_same(seen, want, "set_epoch(saved epoch)");

  // The state saw epoch 1 to its last batch: asked for epoch 1 again, the
  // loader has nothing left of it.
  LoaderState complete = run_until(0, kBatchesPerEpoch, false, seen);
  Loader again(dataset_, augmenting_pipeline(), options(0));
  again.load_state_dict(complete);
  again.set_epoch(1);
  EXPECT_TRUE(again.begin() == again.end());

  Loader other(dataset_, augmenting_pipeline(), options(0));
  other.load_state_dict(state);
  other.set_epoch(0);  // another epoch: the saved position no longer applies
  int64_t count = 0;
  for (Batch& batch : other) {
    EXPECT_TRUE(torch::equal(batch.data, reference[count].data));
    ++count;
  }
  EXPECT_EQ(count, kBatchesPerEpoch);
}

TEST_F(Resume, CustomOrderTravelsInTheState) {
  // A caller's sampler (set_order) that is not reproducible: the state
  // carries the epoch's order.
  auto custom = [](int64_t epoch) {
    std::vector<int64_t> order(30);
    std::iota(order.begin(), order.end(), 0);
    std::rotate(order.begin(), order.begin() + 7 * epoch + 3, order.end());
    return order;
  };
  LoaderOptions opts = options(1);
  std::vector<Seen> reference;
  {
    Loader loader(dataset_, augmenting_pipeline(), opts);
    for (int epoch = 0; epoch < 2; ++epoch) {
      loader.set_order(custom(epoch));
      for (Batch& batch : loader) reference.push_back(keep(batch));
    }
  }
  std::vector<Seen> seen;
  LoaderState state;
  {
    Loader loader(dataset_, augmenting_pipeline(), opts);
    loader.set_order(custom(0));
    loader.begin_epoch();
    for (int i = 0; i < 3; ++i) seen.push_back(keep(*loader.next()));
    state = through_json(loader.state_dict());
  }
  EXPECT_EQ(state.order, custom(0));
  Loader loader(dataset_, augmenting_pipeline(), opts);
  loader.load_state_dict(state);
  for (Batch& batch : loader) seen.push_back(keep(batch));
  loader.set_order(custom(1));
  for (Batch& batch : loader) seen.push_back(keep(batch));
  expect_same(seen, reference, "custom order");
}

TEST_F(Resume, AnotherConfigurationIsRefusedNamingWhatDiffers) {
  std::vector<Seen> seen;
  LoaderState state = run_until(0, 2, false, seen);
  auto refused = [&](LoaderOptions opts, const Dataset& dataset,
                     const std::string& expected) {
    Loader loader(dataset, augmenting_pipeline(), opts);
    try {
      loader.load_state_dict(state);
      ADD_FAILURE() << "accepted a state for another " << expected;
    } catch (const OptionError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  LoaderOptions opts = options(0);
  opts.seed = 5;
  refused(opts, dataset_, "seed 1234");
  opts = options(0);
  opts.batch_size = 6;
  refused(opts, dataset_, "batch_size=7");
  opts = options(0);
  opts.shuffle = false;
  refused(opts, dataset_, "shuffle=1");
  // (Another world size resumes elastically: loader_elastic_test.cc.)
  testing::make_image_folder(dir_ / "smaller", 3, 9);
  refused(options(0), Dataset::image_folder(dir_ / "smaller"), "30 samples");

  Loader other_pipeline(dataset_, Pipeline{RandomResizedCrop(12), ToTensor()}, options(0));
  EXPECT_THROW(other_pipeline.load_state_dict(state), OptionError);

  nlohmann::json json = state.to_json();
  json["version"] = 99;
  EXPECT_THROW(LoaderState::from_json(json), OptionError);
  json = state.to_json();
  json.erase("epoch");
  EXPECT_THROW(LoaderState::from_json(json), OptionError);
  LoaderState impossible = state;
  impossible.batches_consumed = kBatchesPerEpoch + 1;
  Loader loader(dataset_, augmenting_pipeline(), options(0));
  EXPECT_THROW(loader.load_state_dict(impossible), OptionError);
}

}  // namespace
}  // namespace ringloader
