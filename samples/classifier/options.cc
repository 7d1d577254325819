// SPDX-License-Identifier: BSD-3-Clause
// Command-line parsing: "--name value" or "--name=value"; every value checked.
#include "classifier/options.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>

namespace classifier {
namespace {

int64_t parse_int(const std::string& name, const std::string& text,
                  int64_t min_value) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError("--" + name + ": '" + text + "' is not an integer");
  }
  if (value < min_value) {
    throw UsageError("--" + name + ": " + text + " is below the minimum " +
                     std::to_string(min_value));
  }
  return value;
}

double parse_double(const std::string& name, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError("--" + name + ": '" + text + "' is not a number");
  }
  return value;
}

}  // namespace

std::string usage_text(const char* program) {
  return std::string("usage: ") + program + R"( [options]

Trains an image classifier end to end with ringloader.

Default: Fashion-MNIST from Debian's dataset-fashion-mnist, exported once to a
PNG ImageFolder under the cache directory, a small CNN on 28x28 gray images.
With --data DIR: any ImageFolder with DIR/train and DIR/val (or DIR/test), RGB,
ImageNet-style augmentation at 224x224 and a small ResNet.

options:
  --data DIR              ImageFolder root with train/ and val/ or test/
  --fashion-mnist DIR     folder of the Fashion-MNIST IDX files
                          (default /usr/share/datasets/fashion-mnist)
  --cache DIR             where the PNG export lives (default ~/.cache/ringloader)
  --out DIR               checkpoint and pictures (default ./ringloader-out)
  --epochs N              default 12 (Fashion-MNIST) or 30 (--data)
  --batch-size N          default 256
  --lr X                  peak learning rate of the one-cycle schedule
  --workers N             loader worker processes (default 1; 0 = in-process)
  --threads N             torch intra-op threads (default: all cores)
  --device D              cpu, cuda or cuda:N (default cpu)
  --resume PATH           continue from a checkpoint written by this program
                          (mid-epoch ones too: at the exact next batch)
  --checkpoint-every N    also write a checkpoint every N training steps,
                          with the loader's position (default: epoch ends)
  --limit-train N         train on a fixed random subset of N images
  --limit-test N          evaluate on a fixed random subset of N images
  --target-accuracy X     exit 1 if the final test accuracy is below X
                          (default 0.91; 0 disables)
  --check-loss-falls      exit 1 unless the mean loss of the last quarter of
                          the training steps is below that of the first quarter
  --seed N                shuffle, augmentation and initialisation seed (0)
  --help                  this text

exit status: 0 success, 1 a target was missed, 2 bad usage or input.
)";
}

Options parse_options(int argc, char** argv) {
  Options o;
  using Setter = std::function<void(const std::string&, const std::string&)>;
  const std::map<std::string, Setter> valued = {
      {"data", [&](auto&, auto& v) { o.data = v; }},
      {"fashion-mnist", [&](auto&, auto& v) { o.fashion_mnist_dir = v; }},
      {"cache", [&](auto&, auto& v) { o.cache = v; }},
      {"out", [&](auto&, auto& v) { o.out = v; }},
      {"resume", [&](auto&, auto& v) { o.resume = v; }},
      {"device", [&](auto&, auto& v) { o.device = v; }},
      {"epochs", [&](auto& n, auto& v) { o.epochs = parse_int(n, v, 1); }},
      {"batch-size", [&](auto& n, auto& v) { o.batch_size = parse_int(n, v, 1); }},
      {"lr", [&](auto& n, auto& v) {
         o.lr = parse_double(n, v);
         if (!(o.lr > 0)) throw UsageError("--lr must be positive");
       }},
      {"workers", [&](auto& n, auto& v) { o.workers = parse_int(n, v, 0); }},
      {"threads", [&](auto& n, auto& v) { o.threads = parse_int(n, v, 0); }},
      {"limit-train", [&](auto& n, auto& v) { o.limit_train = parse_int(n, v, 1); }},
      {"checkpoint-every", [&](auto& n, auto& v) { o.checkpoint_every = parse_int(n, v, 0); }},
      {"limit-test", [&](auto& n, auto& v) { o.limit_test = parse_int(n, v, 1); }},
      {"target-accuracy", [&](auto& n, auto& v) {
         o.target_accuracy = parse_double(n, v);
         if (o.target_accuracy < 0 || o.target_accuracy > 1) {
           throw UsageError("--target-accuracy must be within [0, 1]");
         }
       }},
      {"seed", [&](auto& n, auto& v) { o.seed = parse_int(n, v, 0); }},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (arg == "--check-loss-falls") {
      o.check_loss_falls = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      throw UsageError("unexpected argument '" + arg + "'");
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = valued.find(name);
    if (it == valued.end()) throw UsageError("unknown option '--" + name + "'");
    if (!has_value) {
      if (i + 1 >= argc) throw UsageError("--" + name + " needs a value");
      value = argv[++i];
    }
    it->second(name, value);
  }
  return o;
}

}  // namespace classifier
