// SPDX-License-Identifier: BSD-3-Clause
#include "classifier/models.h"

namespace classifier {
namespace {

namespace nn = torch::nn;

// Appends conv (no bias) + BatchNorm + ReLU to `seq` and returns it.
nn::Sequential& conv_bn_relu(nn::Sequential& seq, int in, int out,
                             int stride = 1, int kernel = 3) {
  seq->push_back(nn::Conv2d(nn::Conv2dOptions(in, out, kernel)
                                .stride(stride).padding(kernel / 2).bias(false)));
  seq->push_back(nn::BatchNorm2d(out));
  seq->push_back(nn::ReLU(nn::ReLUOptions(true)));
  return seq;
}

class SmallCnn : public Classifier {
 public:
  SmallCnn(int in_channels, int num_classes) {
    nn::Sequential features;
    int in = in_channels;
    for (int out : {32, 64, 128}) {
      conv_bn_relu(features, in, out)->push_back(nn::MaxPool2d(2));
      in = out;
    }
    features_ = register_module("features", features);
    dropout_ = register_module("dropout", nn::Dropout(0.2));
    // 28 -> 14 -> 7 -> 3: 128 x 3 x 3 features.
    head_ = register_module("head", nn::Linear(128 * 3 * 3, num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = features_->forward(x).flatten(1);
    return head_->forward(dropout_->forward(x));
  }
  std::string name() const override { return "small_cnn"; }

 private:
  nn::Sequential features_{nullptr};
  nn::Dropout dropout_{nullptr};
  nn::Linear head_{nullptr};
};

class BasicBlock : public nn::Module {
 public:
  BasicBlock(int in, int out, int stride) {
    nn::Sequential conv1;
    conv1_ = register_module("conv1", conv_bn_relu(conv1, in, out, stride));
    conv2_ = register_module(
        "conv2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2_ = register_module("bn2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      shortcut_ = register_module(
          "shortcut",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1)
                                        .stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = bn2_->forward(conv2_->forward(conv1_->forward(x)));
    torch::Tensor identity = shortcut_ ? shortcut_->forward(x) : x;
    return torch::relu(y + identity);
  }

 private:
  nn::Sequential conv1_{nullptr};
  nn::Conv2d conv2_{nullptr};
  nn::BatchNorm2d bn2_{nullptr};
  nn::Sequential shortcut_{nullptr};
};

class SmallResNet : public Classifier {
 public:
  SmallResNet(int in_channels, int num_classes) {
    nn::Sequential stem;
    conv_bn_relu(stem, in_channels, 32, 2, 7)
        ->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    stem_ = register_module("stem", stem);
    const int widths[4] = {32, 64, 128, 256};
    int in = 32;
    for (int stage = 0; stage < 4; ++stage) {
      blocks_.push_back(register_module(
          "stage" + std::to_string(stage + 1),
          std::make_shared<BasicBlock>(in, widths[stage], stage == 0 ? 1 : 2)));
      in = widths[stage];
    }
    head_ = register_module("head", nn::Linear(in, num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = stem_->forward(x);
    for (auto& block : blocks_) x = block->forward(x);
    return head_->forward(x.mean({2, 3}));
  }
  std::string name() const override { return "small_resnet"; }

 private:
  nn::Sequential stem_{nullptr};
  std::vector<std::shared_ptr<BasicBlock>> blocks_;
  nn::Linear head_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_small_cnn(int in_channels, int num_classes) {
  return std::make_shared<SmallCnn>(in_channels, num_classes);
}

std::shared_ptr<Classifier> make_small_resnet(int in_channels, int num_classes) {
  return std::make_shared<SmallResNet>(in_channels, num_classes);
}

}  // namespace classifier
