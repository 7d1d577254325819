// SPDX-License-Identifier: BSD-3-Clause
// ringloader-bench: the ringloader side of bench/run_all.sh. Every mode prints
// one JSON object on stdout.
//
//   ringloader-bench jpeg    --root DIR [--epochs 3] [--warmup-epochs 1]
//       ImageFolder, RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor
//       + Normalize(ImageNet), batch 64, shuffle, 2 workers: images/s.
//   ringloader-bench fashion --images X.gz --labels Y.gz [--epochs 3]
//       Fashion-MNIST IDX, ToTensor + Normalize, batch 256, shuffle: images/s.
//   ringloader-bench handoff --images X.gz --labels Y.gz [--rounds 20]
//       Trainer-side cost of taking an already-READY batch (next()) and of
//       dropping it (the lease returns the slot), for 1 MiB and 64 MiB
//       batches (uint8, 64 samples of 128x128 vs 1024x1024, made by padding
//       28x28 images with CenterCrop).
//   ringloader-bench rss     --images X.gz --labels Y.gz [--epochs 10]
//       The trainer's VmRSS after epoch 1 and after the last epoch.
//   ringloader-bench profile --root DIR [--limit 300]
//       Per-image CPU time (this thread's, so other load on the machine does
//       not inflate it) of the JPEG workload's stages, one thread, no ring:
//       apply_pipeline() with growing pipelines (decode only, + RRC, + flip,
//       + ToTensor, + Normalize); the differences are the stages' costs.
//       torch_side.py profile measures the same stages for PIL/torchvision.
//
// Common options: --workers 2 --batch-size N --seed 0 --ring-slots 0
// The throughput loops mirror bench/torch_side.py: warm-up epochs are not
// timed, and every batch is touched (one element read) like the torch side does.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ringloader/ringloader.h"

#ifndef RINGLOADER_BENCH_BUILD_TYPE
#define RINGLOADER_BENCH_BUILD_TYPE "unknown"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Args {
  std::string mode;
  std::map<std::string, std::string> values;

  std::string str(const std::string& key, const std::string& fallback = "") const {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
  std::string required(const std::string& key) const {
    auto it = values.find(key);
    if (it == values.end()) {
      std::fprintf(stderr, "ringloader-bench %s: --%s is required\n", mode.c_str(),
                   key.c_str());
      std::exit(2);
    }
    return it->second;
  }
  long integer(const std::string& key, long fallback) const {
    auto it = values.find(key);
    return it == values.end() ? fallback : std::stol(it->second);
  }
};

Args parse(int argc, char** argv) {
  Args args;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: ringloader-bench jpeg|fashion|handoff|rss|profile [--key value]...\n");
    std::exit(2);
  }
  args.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) {
      std::fprintf(stderr, "ringloader-bench: bad argument '%s'\n", key.c_str());
      std::exit(2);
    }
    args.values[key.substr(2)] = argv[++i];
  }
  return args;
}

// kB from /proc/self/status ("VmRSS", "RssAnon", "RssShmem", ...).
long proc_status_kb(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream in(line.substr(field.size() + 1));
      long kb = 0;
      in >> kb;
      return kb;
    }
  }
  return -1;
}

json stats_json(const ringloader::LoaderStats& s) {
  return {{"batches", s.batches},           {"samples", s.samples},
          {"wall_s", s.wall_s},             {"read_s", s.read_s},
          {"decode_s", s.decode_s},         {"transform_s", s.transform_s},
          {"slot_wait_s", s.slot_wait_s},   {"trainer_wait_s", s.trainer_wait_s},
          {"workers", s.workers},           {"ring_slots", s.ring_slots},
          {"ring_bytes", s.ring_bytes},     {"ring_pinned", s.ring_pinned}};
}

// Stats accumulated between two snapshots.
json stats_delta(const ringloader::LoaderStats& a, const ringloader::LoaderStats& b) {
  return {{"batches", b.batches - a.batches},
          {"samples", b.samples - a.samples},
          {"wall_s", b.wall_s - a.wall_s},
          {"read_s", b.read_s - a.read_s},
          {"decode_s", b.decode_s - a.decode_s},
          {"transform_s", b.transform_s - a.transform_s},
          {"slot_wait_s", b.slot_wait_s - a.slot_wait_s},
          {"trainer_wait_s", b.trainer_wait_s - a.trainer_wait_s}};
}

ringloader::LoaderOptions base_options(const Args& args, long batch_size) {
  ringloader::LoaderOptions options;
  options.batch_size = args.integer("batch-size", batch_size);
  options.num_workers = static_cast<int>(args.integer("workers", 2));
  options.ring_slots = static_cast<int>(args.integer("ring-slots", 0));
  options.seed = static_cast<uint64_t>(args.integer("seed", 0));
  options.shuffle = true;
  return options;
}

// Reads one element of a batch, like the torch side's float(data.view(-1)[0]).
double touch(const torch::Tensor& data) {
  if (data.scalar_type() == torch::kFloat32) return data.data_ptr<float>()[0];
  return data.data_ptr<uint8_t>()[0];
}

// utime + stime of these processes (0 = this one), from /proc/PID/stat.
double cpu_seconds(const std::vector<int>& pids) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  double total = 0;
  for (int pid : pids) {
    std::ifstream in(pid ? "/proc/" + std::to_string(pid) + "/stat" : "/proc/self/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stol(field);
      if (i == 15) stime = std::stol(field);
    }
    total += (utime + stime) / ticks;
  }
  return total;
}

json throughput(ringloader::Loader& loader, int epochs, int warmup_epochs) {
  double sink = 0;
  for (int e = 0; e < warmup_epochs; ++e) {
    for (ringloader::Batch& batch : loader) sink += touch(batch.data);
  }
  const double warmup_sink = sink;
  std::vector<int> pids = loader.worker_pids();
  pids.push_back(0);
  const double cpu_start = cpu_seconds(pids);
  const ringloader::LoaderStats before = loader.stats();
  int64_t images = 0, batches = 0;
  const auto start = Clock::now();
  for (int e = 0; e < epochs; ++e) {
    for (ringloader::Batch& batch : loader) {
      sink += touch(batch.data);
      images += batch.data.size(0);
      ++batches;
    }
  }
  const double elapsed = seconds_since(start);
  const double cpu = cpu_seconds(pids) - cpu_start;
  const ringloader::LoaderStats after = loader.stats();
  double load[1] = {0};
  getloadavg(load, 1);
  json out = {{"images", images},
              {"cpu_s", cpu},
              {"cpu_us_per_image", cpu / images * 1e6},
              {"load_average", load[0]},
              {"batches", batches},
              {"seconds", elapsed},
              {"images_per_s", images / elapsed},
              {"sink", sink},
              {"warmup_sink", warmup_sink},
              {"epochs", epochs},
              {"warmup_epochs", warmup_epochs},
              {"timed_stats", stats_delta(before, after)},
              {"stats", stats_json(after)}};
  return out;
}

int run_jpeg(const Args& args) {
  ringloader::Dataset dataset = ringloader::Dataset::image_folder(args.required("root"));
  ringloader::Pipeline pipeline{
      ringloader::RandomResizedCrop(224), ringloader::RandomHorizontalFlip(),
      ringloader::ToTensor(),
      ringloader::Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})};
  const std::string mode = args.str("mode", "exact");  // --mode fast: PipelineMode::kFast
  if (mode == "fast") pipeline.set_mode(ringloader::PipelineMode::kFast);
  ringloader::LoaderOptions options = base_options(args, 64);
  if (args.values.count("intra-op-threads")) {
    options.intra_op_threads = static_cast<int>(args.integer("intra-op-threads", 0));
  }
  ringloader::Loader loader(dataset, pipeline, options);
  json out = throughput(loader, static_cast<int>(args.integer("epochs", 3)),
                        static_cast<int>(args.integer("warmup-epochs", 1)));
  out["side"] = "ringloader";
  out["build_type"] = RINGLOADER_BENCH_BUILD_TYPE;
  out["workload"] = mode == "fast" ? "jpeg-fast" : "jpeg";
  out["dataset_size"] = dataset.size();
  out["batch_size"] = options.batch_size;
  out["num_workers"] = options.num_workers;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

ringloader::Pipeline fashion_pipeline() {
  return ringloader::Pipeline{ringloader::ToTensor(),
                              ringloader::Normalize({0.2860}, {0.3530})};
}

int run_fashion(const Args& args) {
  ringloader::Dataset dataset =
      ringloader::Dataset::idx(args.required("images"), args.required("labels"));
  ringloader::LoaderOptions options = base_options(args, 256);
  ringloader::Loader loader(dataset, fashion_pipeline(), options);
  json out = throughput(loader, static_cast<int>(args.integer("epochs", 3)),
                        static_cast<int>(args.integer("warmup-epochs", 1)));
  out["side"] = "ringloader";
  out["build_type"] = RINGLOADER_BENCH_BUILD_TYPE;
  out["workload"] = "fashion";
  out["dataset_size"] = dataset.size();
  out["batch_size"] = options.batch_size;
  out["num_workers"] = options.num_workers;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::lround(p * (v.size() - 1)));
  return v[i];
}

json summary_us(const std::vector<double>& seconds) {
  double sum = 0;
  for (double s : seconds) sum += s;
  return {{"n", seconds.size()},
          {"median_us", percentile(seconds, 0.5) * 1e6},
          {"p90_us", percentile(seconds, 0.9) * 1e6},
          {"min_us", percentile(seconds, 0.0) * 1e6},
          {"max_us", percentile(seconds, 1.0) * 1e6},
          {"mean_us", seconds.empty() ? NAN : sum / seconds.size() * 1e6}};
}

// Handoff cost for batches of `side` x `side` uint8 (1 channel) samples:
// Fashion-MNIST's 28x28 images zero-padded by CenterCrop to that size (as
// torchvision pads a crop larger than the image), so workers do little more
// than write the bytes. Each round the trainer sleeps until every slot is
// READY, then takes all of them, timing each next(), then drops them in
// order, timing each drop (the lease returns the slot). While it takes them
// no slot is free, so the workers are idle and do not compete for the cores.
json handoff(const Args& args, int side) {
  ringloader::Dataset dataset =
      ringloader::Dataset::idx(args.required("images"), args.required("labels"));
  ringloader::Pipeline pipeline{ringloader::CenterCrop(side)};
  ringloader::LoaderOptions options = base_options(args, 64);
  options.shuffle = false;
  ringloader::Loader loader(dataset, pipeline, options);
  const int slots = loader.stats().ring_slots;
  const int rounds = static_cast<int>(args.integer("rounds", 20));
  auto take = [&]() -> std::optional<ringloader::Batch> {
    std::optional<ringloader::Batch> batch = loader.next();
    if (!batch) {
      loader.begin_epoch();
      batch = loader.next();
    }
    return batch;
  };
  loader.begin_epoch();
  // Calibration: how fast the workers fill slots when nobody waits.
  size_t batch_bytes = 0;
  for (int i = 0; i < slots; ++i) take();  // first fill: page faults
  const auto calibration_start = Clock::now();
  const int calibration_batches = 2 * slots;
  for (int i = 0; i < calibration_batches; ++i) batch_bytes = take()->data.nbytes();
  const double per_batch = seconds_since(calibration_start) / calibration_batches;
  // Long enough for the whole ring to be refilled, with a margin; a batch
  // found not ready anyway is skipped and counted, not timed.
  const double sleep_s = std::max(0.02, 1.5 * slots * per_batch);
  std::vector<double> next_s, drop_s, total_s;
  int not_ready = 0;
  for (int round = 0; round < rounds; ++round) {
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
    std::vector<std::optional<ringloader::Batch>> held;
    std::vector<double> took;
    std::vector<bool> valid;
    for (int i = 0; i < slots; ++i) {
      const double wait_before = loader.stats().trainer_wait_s;
      const auto t0 = Clock::now();
      std::optional<ringloader::Batch> batch = loader.next();
      const auto t1 = Clock::now();
      if (!batch) {  // epoch over: start the next; this round ends here
        loader.begin_epoch();
        break;
      }
      held.push_back(std::move(batch));
      took.push_back(std::chrono::duration<double>(t1 - t0).count());
      // A batch the workers had not finished is not a handoff sample.
      valid.push_back(loader.stats().trainer_wait_s - wait_before <= 20e-6);
    }
    for (size_t i = 0; i < held.size(); ++i) {
      const auto t0 = Clock::now();
      held[i].reset();  // drops the only tensors: the lease returns the slot
      const double dropped = seconds_since(t0);
      if (!valid[i]) {
        ++not_ready;
        continue;
      }
      next_s.push_back(took[i]);
      drop_s.push_back(dropped);
      total_s.push_back(took[i] + dropped);
    }
  }
  return {{"side_px", side},
          {"batch_bytes", batch_bytes},
          {"batch_size", options.batch_size},
          {"ring_slots", slots},
          {"fill_s_per_batch", per_batch},
          {"sleep_s", sleep_s},
          {"not_ready_skipped", not_ready},
          {"next", summary_us(next_s)},
          {"drop", summary_us(drop_s)},
          {"handoff", summary_us(total_s)}};
}

int run_handoff(const Args& args) {
  json small = handoff(args, static_cast<int>(args.integer("small-side", 128)));
  json large = handoff(args, static_cast<int>(args.integer("large-side", 1024)));
  const double ratio = large["handoff"]["median_us"].get<double>() /
                       small["handoff"]["median_us"].get<double>();
  json out = {{"side", "ringloader"},
              {"build_type", RINGLOADER_BENCH_BUILD_TYPE},
              {"workload", "handoff"},
              {"small", small},
              {"large", large},
              {"ratio_median", ratio},
              {"ratio_p90", large["handoff"]["p90_us"].get<double>() /
                                small["handoff"]["p90_us"].get<double>()}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int run_rss(const Args& args) {
  ringloader::Dataset dataset =
      ringloader::Dataset::idx(args.required("images"), args.required("labels"));
  ringloader::LoaderOptions options = base_options(args, 256);
  ringloader::Loader loader(dataset, fashion_pipeline(), options);
  const int epochs = static_cast<int>(args.integer("epochs", 10));
  json per_epoch = json::array();
  double sink = 0;
  long rss_after_first = -1;
  const long rss_start = proc_status_kb("VmRSS");
  for (int e = 0; e < epochs; ++e) {
    for (ringloader::Batch& batch : loader) sink += touch(batch.data);
    const long rss = proc_status_kb("VmRSS");
    if (e == 0) rss_after_first = rss;
    per_epoch.push_back({{"epoch", e + 1},
                         {"vm_rss_kb", rss},
                         {"rss_anon_kb", proc_status_kb("RssAnon")},
                         {"rss_file_kb", proc_status_kb("RssFile")},
                         {"rss_shmem_kb", proc_status_kb("RssShmem")}});
  }
  const long rss_last = proc_status_kb("VmRSS");
  json out = {{"side", "ringloader"},
              {"build_type", RINGLOADER_BENCH_BUILD_TYPE},
              {"workload", "rss"},
              {"dataset_size", dataset.size()},
              {"batch_size", options.batch_size},
              {"num_workers", options.num_workers},
              {"epochs", epochs},
              {"vm_rss_kb_before", rss_start},
              {"vm_rss_kb_epoch1", rss_after_first},
              {"vm_rss_kb_last", rss_last},
              {"growth_kb", rss_last - rss_after_first},
              {"vm_hwm_kb", proc_status_kb("VmHWM")},
              {"per_epoch", per_epoch},
              {"sink", sink},
              {"stats", stats_json(loader.stats())}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

int run_profile(const Args& args) {
  ringloader::Dataset dataset = ringloader::Dataset::image_folder(args.required("root"));
  const size_t limit = static_cast<size_t>(args.integer("limit", 300));
  // Every k-th file, so all classes (source photographs) are represented.
  const auto& files = dataset.files();
  const size_t step = std::max<size_t>(1, files.size() / limit);
  std::vector<std::vector<uint8_t>> encoded;
  for (size_t i = 0; i < files.size() && encoded.size() < limit; i += step) {
    encoded.push_back(read_bytes(files[i].path));
  }
  using ringloader::Pipeline;
  const ringloader::Op normalize =
      ringloader::Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225});
  const std::vector<std::pair<std::string, Pipeline>> stages = {
      // The whole image (Resize needs it all); RRC then decodes only its box.
      {"decode", Pipeline{ringloader::Resize(std::vector<int>{8, 8}, ringloader::Interpolation::kNearest)}},
      {"+rrc", Pipeline{ringloader::RandomResizedCrop(224)}},
      {"+flip", Pipeline{ringloader::RandomResizedCrop(224),
                         ringloader::RandomHorizontalFlip()}},
      {"+totensor", Pipeline{ringloader::RandomResizedCrop(224),
                             ringloader::RandomHorizontalFlip(), ringloader::ToTensor()}},
      {"+normalize", Pipeline{ringloader::RandomResizedCrop(224),
                              ringloader::RandomHorizontalFlip(), ringloader::ToTensor(),
                              normalize}}};
  json cumulative = json::object();
  json per_stage = json::object();
  double previous = 0;
  double sink = 0;
  for (const auto& [name, pipeline] : stages) {
    // Warm-up pass (caches, allocations), then the timed pass.
    for (size_t i = 0; i < std::min<size_t>(encoded.size(), 20); ++i) {
      sink += ringloader::apply_pipeline(pipeline, encoded[i], ringloader::ColorMode::kRGB,
                                         0, 0, i).bytes[0];
    }
    const double start = thread_cpu_s();
    for (size_t i = 0; i < encoded.size(); ++i) {
      sink += ringloader::apply_pipeline(pipeline, encoded[i], ringloader::ColorMode::kRGB,
                                         0, 1, i).bytes[0];
    }
    const double us = (thread_cpu_s() - start) / encoded.size() * 1e6;
    cumulative[name] = us;
    per_stage[name] = us - previous;
    previous = us;
  }
  json out = {{"side", "ringloader"},
              {"build_type", RINGLOADER_BENCH_BUILD_TYPE},
              {"workload", "profile"},
              {"images", encoded.size()},
              {"cpu_us_per_image_cumulative", cumulative},
              {"cpu_us_per_image_stage", per_stage},
              {"sink", sink}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  try {
    if (args.mode == "jpeg") return run_jpeg(args);
    if (args.mode == "fashion") return run_fashion(args);
    if (args.mode == "handoff") return run_handoff(args);
    if (args.mode == "rss") return run_rss(args);
    if (args.mode == "profile") return run_profile(args);
    std::fprintf(stderr, "ringloader-bench: unknown mode '%s'\n", args.mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringloader-bench %s: %s\n", args.mode.c_str(), e.what());
    return 1;
  }
}
