// SPDX-License-Identifier: BSD-3-Clause
// The two models of the sample: a small CNN for 28x28 gray images and a
// narrow ResNet-10 for 224x224 RGB ones.
#pragma once

#include <memory>
#include <string>

#include <torch/torch.h>

namespace classifier {

class Classifier : public torch::nn::Module {
 public:
  // Logits [N, num_classes] for images [N, C, H, W].
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  virtual std::string name() const = 0;
};

// conv32-pool-conv64-pool-conv128-pool-linear, each conv 3x3 with BatchNorm
// and ReLU. Global pooling and a single small linear layer keep it fast on
// CPUs whose BLAS is slow (Debian's libtorch uses the reference BLAS for
// linear layers but oneDNN for convolutions).
std::shared_ptr<Classifier> make_small_cnn(int in_channels, int num_classes);

// A ResNet-10 (one BasicBlock per stage, widths 32-64-128-256) for
// ImageNet-style 224x224 inputs.
std::shared_ptr<Classifier> make_small_resnet(int in_channels, int num_classes);

}  // namespace classifier
