// SPDX-License-Identifier: BSD-3-Clause
// ringloader-train: an image classifier trained end to end with ringloader.
//
// By default it exports Debian's Fashion-MNIST IDX files once to a PNG
// ImageFolder (reading them through a ringloader Loader), then trains a small
// CNN from that folder with RandomCrop + RandomHorizontalFlip augmentation,
// evaluates on the test folder each epoch, and reports where the time went.
// See samples/README.md.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include <ringloader/ringloader.h>

#include "classifier/experiment.h"
#include "classifier/options.h"
#include "classifier/training.h"

namespace {

// libtorch's OpenMP threads spin while they wait for work (libgomp's default
// active wait policy). On a small machine that shares its cores with the
// loader's worker processes, or with anything else, a spinning thread takes
// the core a preempted one needs and every parallel region stalls: on 2 busy
// cores one epoch took 5x longer. libgomp reads OMP_WAIT_POLICY once, when
// it is loaded, so the program re-executes itself with a passive policy
// unless the user chose one.
void prefer_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: carry on
}

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp(argv);
  using namespace classifier;
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ringloader-train: %s\n(try --help)\n", e.what());
    return 2;
  }
  if (options.help) {
    std::fputs(usage_text(argv[0]).c_str(), stdout);
    return 0;
  }
  try {
    torch::Device device(options.device);
    if (device.is_cuda() && !torch::cuda::is_available()) {
      throw UsageError("--device " + options.device +
                       ": CUDA is not available in this build of libtorch or on "
                       "this machine; use --device cpu");
    }
    if (device.is_cuda() && device.has_index() &&
        device.index() >= static_cast<int>(torch::cuda::device_count())) {
      throw UsageError("--device " + options.device + ": there are only " +
                       std::to_string(torch::cuda::device_count()) + " CUDA devices");
    }
    if (!device.is_cpu() && !device.is_cuda()) {
      throw UsageError("--device " + options.device + ": expected cpu, cuda or cuda:N");
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ringloader-train: %s\n", e.what());
    return 2;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "ringloader-train: --device '%s': %s\n", options.device.c_str(),
                 e.what_without_backtrace());
    return 2;
  }

  try {
    Experiment experiment = make_experiment(options);
    return train_and_evaluate(options, experiment);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ringloader-train: %s\n", e.what());
    return 2;
  } catch (const ringloader::IoError& e) {  // missing or empty folder
    std::fprintf(stderr, "ringloader-train: %s\n", e.what());
    return 2;
  } catch (const ringloader::OptionError& e) {  // e.g. a bad loader option
    std::fprintf(stderr, "ringloader-train: %s\n", e.what());
    return 2;
  } catch (const ringloader::Error& e) {  // worker failures, decode errors
    std::fprintf(stderr, "ringloader-train: data loading failed: %s\n", e.what());
    return 3;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "ringloader-train: torch: %s\n", e.what_without_backtrace());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringloader-train: %s\n", e.what());
    return 3;
  }
}
