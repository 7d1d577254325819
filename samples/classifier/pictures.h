// SPDX-License-Identifier: BSD-3-Clause
// PNG pictures drawn with OpenCV: a grid of one augmented batch with its
// labels, and the training curves.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

namespace classifier {

// `images` [N, C, H, W] float, normalized with mean/std (de-normalized here);
// `labels` int64 [N]. Draws up to 64 images, each with its class name.
void save_batch_grid(const std::string& path, const torch::Tensor& images,
                     const torch::Tensor& labels,
                     const std::vector<std::string>& class_names,
                     const std::vector<double>& mean,
                     const std::vector<double>& std);

struct EpochRecord {
  double train_loss = 0;
  double train_accuracy = 0;
  double test_loss = 0;
  double test_accuracy = 0;
  double seconds = 0;
};

// Loss (train, test) and accuracy (train, test) per epoch, side by side.
void save_training_curves(const std::string& path,
                          const std::vector<EpochRecord>& history);

}  // namespace classifier
