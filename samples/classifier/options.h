// SPDX-License-Identifier: BSD-3-Clause
// Command-line options of ringloader-train.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace classifier {

// A bad command line or input path: reported as a message and exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  // Empty: Fashion-MNIST from fashion_mnist_dir, exported once to PNG files.
  std::string data;
  std::string fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";
  std::string cache;  // default: $XDG_CACHE_HOME/ringloader or ~/.cache/ringloader
  std::string out = "./ringloader-out";
  std::string resume;
  int64_t checkpoint_every = 0;  // also checkpoint every N steps (0: epoch ends)
  std::string device = "cpu";
  int workers = 1;
  int threads = 0;       // torch intra-op threads; 0 = all cores
  int epochs = -1;       // -1: the dataset's default
  int64_t batch_size = 256;
  double lr = -1;        // -1: the model's default peak learning rate
  int64_t limit_train = 0;  // 0 = all
  int64_t limit_test = 0;
  double target_accuracy = 0.91;
  uint64_t seed = 0;
  bool check_loss_falls = false;
  bool help = false;
};

// Parses argv; throws UsageError with a message naming the bad option.
Options parse_options(int argc, char** argv);

std::string usage_text(const char* program);

}  // namespace classifier
