// SPDX-License-Identifier: BSD-3-Clause
// GPU benchmarks, run side by side in one process:
//  1. H2D throughput: batches copied from pinned ring slots vs the same
//     bytes from a plain cudaMallocHost buffer (target >= 90%).
//  2. A training-like loop (a GPU matmul per step) fed by ringloader with
//     device = cuda: the trainer's stall per step. The torch DataLoader
//     side of that comparison is bench/gpu/torch_side_gpu.py (same data, same step).
//
//   ringloader-gpu-bench <images.idx[.gz]> <labels.idx[.gz]> [json-out]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "ringloader/ringloader.h"

namespace {

using Clock = std::chrono::steady_clock;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// GB/s of copying `sources` (each `bytes` long) to one device buffer.
double copy_rate(const std::vector<const void*>& sources, size_t bytes, int rounds) {
  void* device = nullptr;
  check(cudaMalloc(&device, bytes), "cudaMalloc");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (const void* source : sources) {  // warm-up
    cudaMemcpyAsync(device, source, bytes, cudaMemcpyHostToDevice, stream);
  }
  cudaEventRecord(start, stream);
  for (int round = 0; round < rounds; ++round) {
    for (const void* source : sources) {
      cudaMemcpyAsync(device, source, bytes, cudaMemcpyHostToDevice, stream);
    }
  }
  cudaEventRecord(stop, stream);
  check(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaFree(device);
  cudaStreamDestroy(stream);
  return bytes * sources.size() * rounds / (ms * 1e-3) / 1e9;
}

struct H2D {
  double ring_gbps = 0, plain_gbps = 0;
  size_t batch_bytes = 0;
};

H2D h2d_from_ring(const ringloader::Dataset& dataset) {
  ringloader::LoaderOptions options;
  // 8192 x 784 B = 6.4 MB batches; three full ones must fit in the epoch
  // (fashion-mnist's 10k test split gives 3 x 3333).
  options.batch_size = std::min<int64_t>(8192, dataset.size() / 3);
  options.drop_last = true;
  options.num_workers = 2;
  options.ring_slots = 4;
  options.pin_memory = true;
  ringloader::Loader loader(dataset, ringloader::Pipeline{}, options);
  loader.begin_epoch();
  std::vector<ringloader::Batch> held;
  for (int i = 0; i < 3; ++i) {
    std::optional<ringloader::Batch> batch = loader.next();
    if (!batch) {
      std::fprintf(stderr, "the epoch ended before 3 batches: too few samples\n");
      std::exit(1);
    }
    held.push_back(std::move(*batch));
  }
  // Pinned at the first iteration, never at construction.
  if (!loader.stats().ring_pinned) {
    std::fprintf(stderr, "ring is not pinned: no CUDA device?\n");
    std::exit(1);
  }
  H2D result;
  result.batch_bytes = held[0].data.nbytes();
  std::vector<const void*> ring_sources;
  for (auto& batch : held) ring_sources.push_back(batch.data.data_ptr());
  result.ring_gbps = copy_rate(ring_sources, result.batch_bytes, 50);
  std::vector<void*> plain(3);
  std::vector<const void*> plain_sources;
  for (void*& buffer : plain) {
    check(cudaMallocHost(&buffer, result.batch_bytes), "cudaMallocHost");
    std::memset(buffer, 1, result.batch_bytes);
    plain_sources.push_back(buffer);
  }
  result.plain_gbps = copy_rate(plain_sources, result.batch_bytes, 50);
  for (void* buffer : plain) cudaFreeHost(buffer);
  return result;
}

struct Stall {
  double images_per_s = 0, stall_ms_per_step = 0, step_ms = 0;
  int steps = 0;
};

// A step of fixed GPU work that reads the batch, like a forward pass.
Stall training_loop(const ringloader::Dataset& dataset, int epochs) {
  ringloader::LoaderOptions options;
  options.batch_size = 256;
  options.num_workers = 2;
  options.shuffle = true;
  options.device = "cuda:0";
  options.device_normalize_mean = {0.2860};
  options.device_normalize_std = {0.3530};
  ringloader::Loader loader(dataset, ringloader::Pipeline{ringloader::PILToTensor()},
                            options);
  auto weight = torch::randn({784, 4096}, torch::kCUDA);
  auto work = torch::randn({4096, 4096}, torch::kCUDA);
  Stall stall;
  double waited = 0;
  int64_t images = 0;
  auto begin = Clock::now();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    auto it = loader.begin();
    while (it != loader.end()) {
      auto hidden = torch::mm(it->data.view({it->data.size(0), 784}), weight);
      for (int i = 0; i < 4; ++i) hidden = torch::mm(hidden, work).tanh_();
      images += it->data.size(0);
      ++stall.steps;
      torch::cuda::synchronize();  // the step's result is consumed
      auto wait_start = Clock::now();
      ++it;
      waited += std::chrono::duration<double>(Clock::now() - wait_start).count();
    }
  }
  double wall = std::chrono::duration<double>(Clock::now() - begin).count();
  stall.images_per_s = images / wall;
  stall.stall_ms_per_step = 1e3 * waited / stall.steps;
  stall.step_ms = 1e3 * wall / stall.steps;
  return stall;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s images.idx labels.idx [json-out]\n", argv[0]);
    return 2;
  }
  auto dataset = ringloader::Dataset::idx(argv[1], argv[2]);
  H2D h2d = h2d_from_ring(dataset);
  training_loop(dataset, 1);  // warm-up: cuBLAS handles, caching allocator
  Stall stall = training_loop(dataset, 3);
  char json[512];
  std::snprintf(json, sizeof(json),
                "{\"h2d_batch_mb\": %.1f, \"h2d_ring_gbps\": %.2f, "
                "\"h2d_plain_pinned_gbps\": %.2f, \"h2d_ratio\": %.3f, "
                "\"loop_images_per_s\": %.0f, \"loop_step_ms\": %.3f, "
                "\"loop_stall_ms_per_step\": %.3f, \"loop_steps\": %d}",
                h2d.batch_bytes / 1e6, h2d.ring_gbps, h2d.plain_gbps,
                h2d.ring_gbps / h2d.plain_gbps, stall.images_per_s, stall.step_ms,
                stall.stall_ms_per_step, stall.steps);
  std::printf("%s\n", json);
  if (argc > 3) std::ofstream(argv[3]) << json << "\n";
  return 0;
}
