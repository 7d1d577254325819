// SPDX-License-Identifier: BSD-3-Clause
// The GPU stage. Without a usable GPU (or with a CPU-only libtorch) these
// tests check the clear refusal and skip the rest with a message.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <thread>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

class CudaStage : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "images", 3, 12, "png", 40, 64);
    dataset_ = Dataset::image_folder(dir_ / "images");
  }
  LoaderOptions options(const std::string& device) {
    LoaderOptions out;
    out.batch_size = 5;
    out.num_workers = 2;
    out.shuffle = true;
    out.seed = 9;
    out.device = device;
    return out;
  }
  static bool gpu() { return torch::cuda::is_available(); }
  testing::TempDir dir_;
  Dataset dataset_;
};

Pipeline float_pipeline() {
  return Pipeline{RandomResizedCrop(32), RandomHorizontalFlip(), ToTensor(),
                  Normalize({0.4, 0.5, 0.6}, {0.2, 0.3, 0.25})};
}

std::vector<torch::Tensor> epoch_on_host(Loader& loader) {
  std::vector<torch::Tensor> out;
  for (Batch& batch : loader) {
    out.push_back(batch.data.to(torch::kCPU).clone());
    out.push_back(batch.target.to(torch::kCPU).clone());
  }
  return out;
}

TEST_F(CudaStage, RefusedClearlyWithoutAGpu) {
  if (gpu()) GTEST_SKIP() << "a GPU is present";
  try {
    Loader loader(dataset_, float_pipeline(), options("cuda:0"));
    FAIL() << "expected OptionError";
  } catch (const OptionError& error) {
    EXPECT_NE(std::string(error.what()).find("cuda:0"), std::string::npos);
  }
  // Host-only still works with the same options otherwise.
  Loader loader(dataset_, float_pipeline(), options("cpu"));
  EXPECT_EQ(epoch_on_host(loader).size(), 2u * 8u);
}

TEST_F(CudaStage, BadDeviceStringIsAnOptionError) {
  EXPECT_THROW(Loader(dataset_, float_pipeline(), options("gpu0")), OptionError);
}

TEST_F(CudaStage, DeviceBytesEqualHostBytes) {
  if (!gpu()) GTEST_SKIP() << "no GPU: " << "CUDA tests need one";
  Loader host(dataset_, float_pipeline(), options("cpu"));
  Loader device(dataset_, float_pipeline(), options("cuda:0"));
  EXPECT_FALSE(device.stats().ring_pinned);  // CUDA waits for the first iteration
  auto expected = epoch_on_host(host);
  std::vector<torch::Tensor> got;
  for (Batch& batch : device) {
    EXPECT_TRUE(batch.data.is_cuda());
    EXPECT_TRUE(batch.target.is_cuda());
    got.push_back(batch.data.cpu());
    got.push_back(batch.target.cpu());
  }
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], expected[i])) << i;
  EXPECT_EQ(device.stats().device_batches, 8);
  EXPECT_TRUE(device.stats().ring_pinned);  // implied by a cuda device
}

TEST_F(CudaStage, OnDeviceFinishingMatchesToTensorNormalize) {
  if (!gpu()) GTEST_SKIP() << "no GPU";
  Pipeline u8{RandomResizedCrop(32), RandomHorizontalFlip()};
  Pipeline f32{RandomResizedCrop(32), RandomHorizontalFlip(), ToTensor(),
               Normalize({0.4, 0.5, 0.6}, {0.2, 0.3, 0.25})};
  auto opts = options("cuda:0");
  opts.device_normalize_mean = {0.4, 0.5, 0.6};
  opts.device_normalize_std = {0.2, 0.3, 0.25};
  Loader finished(dataset_, u8, opts);
  Loader host(dataset_, f32, options("cpu"));
  auto expected = epoch_on_host(host);
  size_t i = 0;
  for (Batch& batch : finished) {
    ASSERT_EQ(batch.data.dtype(), torch::kFloat32);
    auto diff = (batch.data.cpu() - expected[i]).abs().max().item<float>();
    EXPECT_LE(diff, 2e-6) << "batch " << i / 2;
    i += 2;
  }
  EXPECT_EQ(i, expected.size());
}

TEST_F(CudaStage, SlowAndFastConsumersSeeTheSameBatches) {
  if (!gpu()) GTEST_SKIP() << "no GPU";
  Loader host(dataset_, float_pipeline(), options("cpu"));
  auto expected = epoch_on_host(host);
  for (int slow : {0, 1}) {
    auto opts = options("cuda:0");
    opts.device_slots = 2;
    opts.ring_slots = 3;
    Loader device(dataset_, float_pipeline(), opts);
    size_t i = 0;
    for (Batch& batch : device) {
      // Work on the current stream that reads the batch, then (slow) a pause
      // that lets copies of later batches run ahead into other slots.
      torch::Tensor sum = (batch.data * 2).sum();
      if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(30));
      EXPECT_NEAR(sum.item<float>(), (expected[i] * 2).sum().item<float>(), 1e-2);
      EXPECT_TRUE(torch::equal(batch.data.cpu(), expected[i])) << "slow " << slow;
      i += 2;
    }
    EXPECT_EQ(i, expected.size());
  }
}

TEST_F(CudaStage, HoldingEveryDeviceSlotRaisesLeaseError) {
  if (!gpu()) GTEST_SKIP() << "no GPU";
  auto opts = options("cuda:0");
  opts.device_slots = 2;
  Loader loader(dataset_, float_pipeline(), opts);
  loader.begin_epoch();
  std::vector<Batch> held;
  held.push_back(*loader.next());
  held.push_back(*loader.next());
  EXPECT_THROW(loader.next(), LeaseError);
  held.clear();
  EXPECT_TRUE(loader.next().has_value());
}

}  // namespace
}  // namespace ringloader
