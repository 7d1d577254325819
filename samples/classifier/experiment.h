// SPDX-License-Identifier: BSD-3-Clause
// What is trained on what: datasets, pipelines, model and hyper-parameters
// for Fashion-MNIST (default) or any RGB ImageFolder (--data).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ringloader/ringloader.h>

#include "classifier/models.h"
#include "classifier/options.h"

namespace classifier {

struct Experiment {
  std::string title;
  ringloader::Dataset train;
  ringloader::Dataset test;
  ringloader::Pipeline train_pipeline;
  ringloader::Pipeline test_pipeline;
  std::vector<std::string> class_names;  // for pictures and messages
  std::vector<double> mean, std;         // of Normalize, to undo it in pictures
  std::shared_ptr<Classifier> model;
  int epochs = 10;
  double peak_lr = 4e-3;
  double weight_decay = 5e-4;
  double setup_s = 0;  // export and folder scans, for the time report
};

// Throws UsageError (missing IDX files or folders) or ringloader::IoError.
Experiment make_experiment(const Options& options);

}  // namespace classifier
