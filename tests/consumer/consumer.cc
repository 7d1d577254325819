// SPDX-License-Identifier: BSD-3-Clause
// One epoch over an ImageFolder through the installed library: its headers,
// its exported symbols, and the worker executable it finds next to itself.
//   consumer <image folder>   prints "consumer: <batches> batches, <samples> samples"
#include <ringloader/ringloader.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer <image folder>\n");
    return 2;
  }
  auto dataset = ringloader::Dataset::image_folder(argv[1]);
  ringloader::Pipeline pipeline{ringloader::Resize(16), ringloader::CenterCrop({16, 16}),
                                ringloader::ToTensor()};
  ringloader::LoaderOptions options;
  options.batch_size = 4;
  options.num_workers = 2;
  ringloader::Loader loader(dataset, pipeline, options);
  int64_t batches = 0, samples = 0;
  for (ringloader::Batch& batch : loader) {
    if (batch.data.size(1) != 3 || batch.data.size(2) != 16) return 1;
    ++batches;
    samples += batch.data.size(0);
  }
  std::printf("consumer: %lld batches, %lld samples\n", static_cast<long long>(batches),
              static_cast<long long>(samples));
  return samples == dataset.size() ? 0 : 1;
}
