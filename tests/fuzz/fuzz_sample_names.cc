// SPDX-License-Identifier: BSD-3-Clause
// Names are data (issue 42): a dataset's author chooses its tar member
// names and its shard index, and both reach the trainer as text. The input
// is "<names>\0<index JSON>":
//  - the index JSON goes through the shard index reader (load_tar_manifest)
//    and, when it loads, every sample is described (describe_tar_sample);
//  - each record of <names> (separated by '\x1e', so that a name may hold
//    newlines) becomes the key of an image member of a shard,
//    which is indexed and read by a worker's BatchFiller through a pipeline
//    that fails on every sample (RandomCrop(32) of a 4x4 image), so the
//    worker composes its error text from the sample's name; the trainer's
//    side then reads the slot's error record (read_failed_slot).
// Invariants: no crash; every error is a typed ringloader::Error; a failed
// batch names a sample of the batch, in a record an honest worker writes
// (no violation note) that fits its slot. No command ever runs: the shard
// is a local file and a loaded index is never read from.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "loader/data/atomic_file.h"
#include "loader/data/tar/tar_index.h"
#include "loader/data/tar/tar_manifest.h"
#include "loader/data/tar/tar_writer.h"
#include "loader/ring/ring.h"
#include "loader/ring/slot_protocol.h"
#include "loader/ring/slot_validation.h"
#include "loader/worker/batch_filler.h"
#include "ringloader/dataset.h"
#include "ringloader/errors.h"
#include "ringloader/transforms.h"

namespace {

using namespace ringloader;

constexpr size_t kMaxNames = 6;
constexpr int kCrop = 32;

// A private folder for the shard and the index (tmpfs where there is one:
// AtomicFile's fsync costs nothing there).
const std::string& folder() {
  static const std::string path = [] {
    char pattern[] = "/dev/shm/ringloader-fuzz-XXXXXX";
    char fallback[] = "/tmp/ringloader-fuzz-XXXXXX";
    const char* made = mkdtemp(pattern);
    if (!made) made = mkdtemp(fallback);
    if (!made) __builtin_trap();
    return std::string(made);
  }();
  return path;
}

// A 4x4 24-bit BMP: decodes, and is too small for RandomCrop(32).
std::string tiny_bmp() {
  std::string bmp(14 + 40 + 4 * 12, '\0');
  auto put = [&](size_t at, uint32_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) bmp[at + i] = static_cast<char>(value >> (8 * i));
  };
  bmp[0] = 'B';
  bmp[1] = 'M';
  put(2, static_cast<uint32_t>(bmp.size()), 4);
  put(10, 54, 4);
  put(14, 40, 4);
  put(18, 4, 4);   // width
  put(22, 4, 4);   // height
  put(26, 1, 2);   // planes
  put(28, 24, 2);  // bits per pixel
  for (size_t i = 54; i < bmp.size(); ++i) bmp[i] = static_cast<char>(i * 37);
  return bmp;
}

// Any exception that is not one of ours breaks the "errors are typed" rule.
template <typename Body>
void typed_errors_only(Body body) {
  try {
    body();
  } catch (const Error&) {
  } catch (...) {
    __builtin_trap();
  }
}

void read_index(const std::string& text) {
  const std::string path = folder() + "/index.json";
  data::write_file_atomically(path, text, 0600);
  typed_errors_only([&] {
    data::TarIndex index = data::load_tar_manifest(path, {}, 0);
    int64_t total = 0;
    for (int64_t size : index.shard_sizes) total += size;
    if (total != index.size()) __builtin_trap();
    for (int64_t sample = 0; sample < index.size() && sample < 64; ++sample) {
      if (data::describe_tar_sample(index, sample).rfind("sample ", 0) != 0) __builtin_trap();
    }
  });
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size() && names.size() < kMaxNames) {
    size_t end = text.find('\x1e', start);
    if (end == std::string::npos) end = text.size();
    names.push_back(text.substr(start, std::min<size_t>(end - start, 1024)));
    start = end + 1;
  }
  return names;
}

// The worker's error text for a batch of every sample of a shard whose
// image members are keyed by `names`.
void fail_a_batch(const std::vector<std::string>& names) {
  const std::string shard = folder() + "/s.tar";
  {
    static const std::string bmp = tiny_bmp();
    data::TarWriter writer(shard);
    for (const std::string& name : names) writer.add(name + ".bmp", bmp.data(), bmp.size());
    writer.close();
  }
  worker::WorkerConfig config;
  config.dataset = Dataset::tar_shards({shard}, TarShardOptions{});
  const int64_t count = config.dataset.size();
  if (count <= 0) return;
  config.pipeline = Pipeline{RandomCrop(std::vector<int>{kCrop})};
  config.max_image_pixels = int64_t{1} << 20;
  ring::RingGeometry geometry;
  geometry.slot_count = 1;
  geometry.worker_capacity = 1;
  geometry.batch_size = static_cast<uint32_t>(count);
  geometry.sample_bytes = kCrop * kCrop * 3;
  geometry.order_capacity = static_cast<uint64_t>(count);
  auto ring = ring::Ring::create(geometry);
  for (int64_t i = 0; i < count; ++i) ring->set_order_entry(0, i, i);
  ring::SlotProtocol protocol(*ring);
  if (!protocol.acquire_for_fill(0, [] { return false; })) __builtin_trap();
  worker::BatchFiller filler(config, *ring, 0);
  ring::Claim claim;
  claim.sample_count = static_cast<uint64_t>(count);
  filler.fill(claim);
  const ring::SlotControl& slot = ring->slot(0);
  const int64_t sample = slot.error_sample;
  if (slot.error_kind == 0 || sample < 0 || sample >= count) __builtin_trap();
  const ring::FailedSlot failed = ring::read_failed_slot(*ring, 0);
  if (!failed.note.empty() || failed.text.empty() || failed.text.size() >= ring::kErrorTextBytes) {
    __builtin_trap();
  }
  if (failed.text.find("sample " + std::to_string(sample)) == std::string::npos) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  if (split != std::string::npos) read_index(input.substr(split + 1));
  const std::vector<std::string> names = split_names(input.substr(0, split));
  typed_errors_only([&] { fail_a_batch(names); });
  return 0;
}
