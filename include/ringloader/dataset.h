// SPDX-License-Identifier: BSD-3-Clause
// Where samples come from. A Dataset is a description the trainer resolves
// once (folders are scanned, files listed) and ships to workers as data, so
// every process sees the same samples in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringloader/export.h"
#include "ringloader/transforms.h"

namespace ringloader {
namespace data {
struct TarIndex;
class ShardCounter;
class SampleTable;
class TensorRows;
}

// A tar sample named by its shard and its place there (the ordinal-th
// sample of shard `shard`, from 0), for when its dataset index is not known
// yet: its shards are still being indexed in the background
// (TarShardOptions::index_in_background) and not every shard before it has
// been counted. Such names are >= 2^62, so never a dataset index.
struct ShardSample {
  int64_t shard = 0;    // in [0, 2^30)
  int64_t ordinal = 0;  // in [0, 2^32)
};
inline constexpr int64_t kShardSampleBit = int64_t{1} << 62;
inline constexpr bool is_shard_sample(int64_t index) {
  return (index & kShardSampleBit) != 0 && index > 0;
}
inline constexpr int64_t shard_sample_index(ShardSample sample) {
  return kShardSampleBit | (sample.shard << 32) | sample.ordinal;
}
inline constexpr ShardSample shard_sample_of(int64_t index) {
  return {(index >> 32) & ((int64_t{1} << 30) - 1), index & 0xffffffff};
}
// Whether `index` is a ShardSample of one of `shard_count` shards.
inline constexpr bool is_shard_sample(int64_t index, int64_t shard_count) {
  return is_shard_sample(index) && shard_sample_of(index).shard < shard_count;
}

// One sample of a file-backed dataset: an encoded image and its label.
struct RINGLOADER_EXPORT FileSample {
  std::string path;
  int64_t label = 0;
};

// How tar shards are read (see Dataset::tar_shards). Plain data.
struct RINGLOADER_EXPORT TarShardOptions {
  // Samples a seeded shuffle buffer mixes when the Loader shuffles
  // (WebDataset's shuffle(n)), on top of a per-epoch shard order. As
  // WebDataset's (initial=100), it lets samples out once it holds 100 and
  // grows to n meanwhile, so a first batch never waits for n samples. 0 or
  // 1 keeps each shard's samples in archive order. Default: 1000.
  int64_t shuffle_buffer = 1000;
  // Default: kRGB.
  ColorMode mode = ColorMode::kRGB;
  // A shard index file (docs/tar_shards.md, "Shard index"): a path or
  // "pipe:<command>" giving the JSON that `ringloader-shard` writes next to
  // the shards it makes (or with --index-only for existing ones). With it,
  // construction reads that file instead of every shard (pipe: shards are
  // not streamed until a worker reads them). It must list the shards the
  // URLs give, in order (an empty URL list takes its list). Checked, never
  // trusted: a corrupt one is an IoError naming it and the reason, one for
  // other shards an OptionError; a stale one (a local shard of another
  // size; a pipe: member not where it says) an IoError naming the shard and
  // "stale index". A plain wids index (per-shard "nsamples" only, as
  // WebDataset's widsindex writes it) serves pipe: shards read without a
  // cache: each worker finds sample k of a shard by streaming it, and reads
  // its label there, so sample_label / sample_labels / tar_member raise
  // OptionError (they need labels up front), and a count the shard does
  // not match is an IoError "stale index" in the worker. For local shards
  // or with cache_dir it is an OptionError saying how to write a full one.
  // Default: "" (index the shards by reading them).
  std::string index;
  // Shards read at once when there is no index: construction streams every
  // pipe: shard (and walks every local shard's headers) to build its
  // table, and a download is usually limited per connection, so one at a
  // time leaves the link idle. The table and any error are those of a
  // one-at-a-time pass. Default: 8.
  int index_streams = 8;
  // Without an index, when every shard is a pipe: URL and there is no
  // cache_dir (a private_cache is fine): construction returns at once and
  // the shards are indexed in the background, index_streams at a time. A
  // Loader made before they all are starts its first epoch at once
  // (docs/tar_shards.md, "Indexing while reading"): shards are indexed in
  // that epoch's shard order, and its first batch waits for the first
  // shard only (and ~100 + 2 x batch_size samples: the shuffle buffer's
  // ramp-up, shuffle_buffer above). The epoch is the one a
  // full index gives, batch for batch. Whatever needs every shard's count
  // (size(), the labels, a Loader's size() and state_dict(), a second
  // epoch, set_order, world_size > 1, on_error = kSkip) waits for the
  // index instead. false: construction indexes every shard first. Until
  // the index is complete, Batch::sample_indices of that first epoch name
  // samples by shard (is_shard_sample). Default: true.
  bool index_in_background = true;

  // --- Shard cache (docs/tar_shards.md, "Shard cache") ---
  // A folder on local disk where shards are fetched once per node and
  // shared by every worker (and every loader, every process, that names
  // the same folder; flock keeps it to one fetch per shard). pipe: shards
  // are cached; local ones too with cache_local. Indexing fetches through
  // it, and the Loader fetches the next prefetch_shards shards of the epoch
  // order ahead of the workers. It must be this user's own folder, writable
  // by no one else (created 0700 when missing); another user's, or one
  // others may write, is an IoError naming it. Default: "" (no shared
  // cache; see private_cache).
  std::string cache_dir;
  // With no cache_dir and no index, when every shard is a pipe: URL: a
  // cache folder of this process's own, $TMPDIR/ringloader-shards-XXXXXX
  // (else /tmp; mode 0700, copies 0600), removed when the dataset and its
  // loaders are gone or the process exits, and by the next one of this
  // user after a kill -9. Indexing (in the background, as without a cache)
  // fetches each shard into it once, in the first epoch's shard order, and
  // workers read the copies: no worker restarts a command, and later
  // epochs fetch only shards evicted since. It keeps at most half the free
  // space of its file system when made, at most cache_limit_bytes (at
  // least 64 MiB), least recently used copies deleted first.
  // false: each worker streams the pipe: shards it reads (no files).
  // Default: true.
  bool private_cache = true;
  // Bytes of shards the folder keeps; the least recently used are deleted
  // beyond it (a shard larger than the limit is still used, alone). Should
  // hold prefetch_shards + 2 shards or more per loader sharing it, or shards
  // get fetched again. Default: 16 GiB.
  uint64_t cache_limit_bytes = uint64_t{16} << 30;
  // Shards fetched ahead of the epoch order. Default: 2.
  int prefetch_shards = 2;
  // Cache local shards too (a slow network file system). Default: false.
  bool cache_local = false;
  // Tries per fetch (waits 0.2 s, then 4x longer each time) before an
  // IoError naming the shard, the command's exit status and its stderr.
  // Default: 3.
  int fetch_attempts = 3;
};

// Where one sample of tar shards lives (Dataset::tar_member). Plain data.
struct RINGLOADER_EXPORT TarMember {
  // The shard's path or pipe: URL. Default: "".
  std::string shard;
  // The image member's data: its offset in the shard and its bytes.
  // Default: 0.
  uint64_t offset = 0;
  // Default: 0.
  uint64_t size = 0;
  // The integer text of <key>.cls. Default: -1 (no .cls member).
  int64_t label = -1;
  // The image member's name. Default: "".
  std::string name;
};

// One dataset of a weighted mix (Dataset::mix): its samples, the samples
// it gives per epoch, and its tar shards (0 for files).
struct RINGLOADER_EXPORT MixPart {
  int64_t size = 0;
  int64_t choose = 0;
  int64_t shards = 0;
};

// How a mix sizes its epoch (Dataset::mix).
struct RINGLOADER_EXPORT MixOptions {
  // Samples per epoch over all ranks, split over the datasets by weight
  // (Mosaic Streaming's `epoch_size` with `proportion`). Default: 0, the
  // datasets' total size.
  int64_t epoch_size = 0;
};

// Samples per epoch of each part of a mix with these sizes and weights
// (what Dataset::mix gives each part; for mixes of Python datasets).
// Throws OptionError for non-positive weights or empty parts.
RINGLOADER_EXPORT std::vector<int64_t> mix_counts(const std::vector<int64_t>& sizes,
                                const std::vector<double>& weights, int64_t epoch_size);

// The element types of Dataset::tensor_rows (torch's dtypes of those
// names; JSON and Python spell them "uint8", "int8", "int16", "int32",
// "int64", "float16", "bfloat16", "float32", "float64", "bool").
enum class ElementType : uint8_t {
  kUInt8 = 0, kInt8, kInt16, kInt32, kInt64,
  kFloat16, kBFloat16, kFloat32, kFloat64, kBool,
};
RINGLOADER_EXPORT const char* name_of(ElementType type);
// OptionError listing the valid names for an unknown one.
RINGLOADER_EXPORT ElementType element_type_from_name(const std::string& name);
// Bytes of one element; OptionError for a value outside the enum (a code
// read from memory another process wrote is checked with it).
RINGLOADER_EXPORT size_t element_size(ElementType type);

// The rows of an in-memory tensor (Dataset::tensor_rows). Plain data; the
// memory it points to is only read, and only during the call.
struct RINGLOADER_EXPORT TensorRowsData {
  // row_count rows, row-major and contiguous (a C-contiguous tensor's
  // storage). Default: null (an OptionError).
  const void* rows = nullptr;
  // Default: 0 (an OptionError: a dataset has rows).
  int64_t row_count = 0;
  // Default: kFloat32.
  ElementType type = ElementType::kFloat32;
  // The shape of one row, at most 8 dimensions (a tensor's shape without
  // its first dimension), under 2 GiB a row. Default: {} (one element per
  // row).
  std::vector<int64_t> row_shape;
  // row_count labels, or null. Default: null (every target is 0).
  const int64_t* labels = nullptr;
};

// A value: immutable once made (factories scan, index and validate up
// front), cheap to copy (a tar index and a sample table are shared, const),
// and safe to read and copy from any number of threads. A Loader keeps its
// own copy.
//
// File-backed datasets keep their paths and labels in one sample table, and
// tar shards their members' offsets, sizes, labels and names in one tar
// sample table: a sealed memfd built once in the trainer and mapped
// read-only by every worker (docs/index.md), so no process holds a private
// copy of the list.
class RINGLOADER_EXPORT Dataset {
 public:
  // torchvision.datasets.ImageFolder: root/<class>/<image>; classes are the
  // sub-folder names sorted by byte order, labels their positions; files are
  // sorted within a class. Accepts torchvision's IMG_EXTENSIONS
  // (case-insensitive). Class folders are listed in parallel. Throws
  // IoError for a missing or empty folder.
  static Dataset image_folder(const std::string& root,
                              ColorMode mode = ColorMode::kRGB);
  // The same with a filter: `extensions` as torchvision's DatasetFolder
  // compares them (the lower-cased name ends with one, as given; empty:
  // IMG_EXTENSIONS), or every file with `all_files` (for a Python
  // is_valid_file, which then picks with select()).
  static Dataset image_folder(const std::string& root, ColorMode mode,
                              const std::vector<std::string>& extensions, bool all_files);

  // An explicit list of (path, label). Paths are used as given.
  static Dataset file_list(std::vector<FileSample> samples,
                           ColorMode mode = ColorMode::kRGB);

  // A text file of "<path> <label>" lines; relative paths are resolved
  // against the list file's folder.
  static Dataset file_list(const std::string& list_path,
                           ColorMode mode = ColorMode::kRGB);

  // MNIST-style IDX files (images idx3-ubyte, labels idx1-ubyte), plain or
  // gzip-compressed, e.g. Debian's /usr/share/datasets/fashion-mnist.
  // Images of shape (N, H, W) are 8-bit grayscale ("L"), like
  // torchvision.datasets.MNIST; (N, H, W, 3) are RGB, like the arrays of
  // torchvision.datasets.CIFAR10 (which ringloader.DataLoader writes to an
  // IDX memfd to run them natively).
  static Dataset idx(const std::string& images_path,
                     const std::string& labels_path);

  // WebDataset-style tar shards: members sharing a key (the basename up to
  // its first dot: 000123.jpg + 000123.cls) make one sample; the image is
  // the member with one of torchvision's image extensions, the label the
  // integer text of <key>.cls (-1 without one). Each URL is a path, a brace
  // pattern ("/data/train-{0000..0099}.tar", "{a,b}.tar") or
  // "pipe:<command>" (its stdout is the shard, e.g. "pipe:curl -s URL").
  // The shards are indexed here, once: local ones by their headers only,
  // pipe: ones by streaming them (or the index is read from
  // options.index, a shard index file, and no shard is read), into a
  // sealed table that workers map read-only (docs/index.md, "Tar shards"). With LoaderOptions::shuffle, each epoch
  // permutes the shard order and mixes samples through a bounded buffer,
  // so workers read shards front to back. Throws IoError naming the shard
  // and member for a corrupt or truncated shard, OptionError for a bad
  // pattern.
  //   auto train = Dataset::tar_shards({"/data/train-{0000..0099}.tar"});
  static Dataset tar_shards(const std::vector<std::string>& urls,
                            const TarShardOptions& options = {});

  // A weighted mix (Mosaic Streaming's `proportion` semantics): each epoch
  // has options.epoch_size samples (default: the parts' total size), of
  // which part p gives round(epoch_size * weight_p / sum of weights)
  // (largest remainder, so the counts sum up): whole shuffled passes over
  // it plus the head of one more, drawn per (seed, epoch) and interleaved
  // (see docs/distributed.md "Weighted mixing"). Sample indices are the
  // parts' concatenation (part 1's first sample is part 0's size). Parts
  // must be all file-backed (image_folder / file_list) or all tar shards,
  // of one color mode; other combinations (IDX, folders with tar) throw
  // OptionError, as do non-positive weights and empty parts. Labels are
  // kept as each part has them. Thread-safety: a plain value, like Dataset.
  static Dataset mix(const std::vector<std::pair<Dataset, double>>& parts,
                     const MixOptions& options = {});

  // Rows of an in-memory tensor and their labels (torch's TensorDataset of
  // (features, int64 labels)): copied once into a sealed memfd that every
  // worker maps read-only, and copied row by row into the ring slot with no
  // decode and no pipeline (the Loader's Pipeline must be empty: OptionError
  // otherwise). Batch::data is (N, *row_shape) of the rows' type,
  // Batch::target the labels (0 without). Throws OptionError for an empty
  // or malformed description (a row of 2 GiB or more, over 8 dimensions), IoError
  // when the memfd cannot be made. Thread-safety: a plain value, like
  // Dataset (the mapping is read-only; copies share it).
  static Dataset tensor_rows(const TensorRowsData& rows);
  // The rows another process (ringloader's Python layer) wrote in that
  // format, opened by path (/proc/<pid>/fd/<n> of a sealed memfd). IoError
  // naming the path and what is wrong: unsealed, corrupt header, offsets
  // outside the file.
  static Dataset tensor_rows(const std::string& memfd_path);

  int64_t size() const;
  // File-backed datasets: sample `index`'s path and label (tar shards: its
  // label), read from the shared table (bounds-checked; IoError naming the
  // index when outside).
  std::string sample_path(int64_t index) const;
  int64_t sample_label(int64_t index) const;
  // Tar shards: sample `index`'s member, read from the shared tar sample
  // table (checked: IoError naming the table and sample when `index` is
  // outside or the table is corrupt); OptionError for other kinds.
  TarMember tar_member(int64_t index) const;
  // Tar shards: sample `index`'s image bytes, read as a worker reads them
  // (through the shard cache when there is one; a pipe: shard streamed to
  // the member, whose tar header is checked against the index). IoError
  // naming the shard and member ("stale index" when the shard changed),
  // OptionError for other kinds. Each call opens what it reads: for
  // inspecting samples (Python's dataset[i]), not for loading. `label`,
  // when given, receives the sample's label as the worker reads it (from
  // the shard's <key>.cls for a counts-only index, whose table has none).
  std::vector<uint8_t> tar_member_bytes(int64_t index, int64_t* label = nullptr) const;
  // The labels column of the shared table of a file-backed or tar dataset
  // (size() values, read-only mapping; valid while a copy of this Dataset
  // lives), or null for other kinds; and the table's bytes (0 for other
  // kinds).
  const int64_t* sample_labels() const;
  uint64_t sample_table_bytes() const;
  // A file-backed dataset of these samples of this one, in this order (a
  // torchvision Subset, an is_valid_file filter). OptionError for other
  // kinds or an index outside.
  Dataset select(const std::vector<int64_t>& indices) const;
  // A mix's parts (empty for any other dataset).
  const std::vector<MixPart>& mix_parts() const { return mix_; }
  // Class names for image_folder (index = label); empty otherwise.
  const std::vector<std::string>& classes() const { return classes_; }
  ColorMode color_mode() const { return mode_; }
  // Fixed image size (height, width) when every sample has it (IDX), else 0.
  int image_height() const { return image_height_; }
  int image_width() const { return image_width_; }

  // The resolved description that workers rebuild the dataset from.
  nlohmann::json to_json() const;
  static Dataset from_json(const nlohmann::json& description);

  // Every (path, label) of a file-backed dataset, copied out of the table:
  // O(size) memory, for small datasets and tools; loops over a large one
  // should use sample_path / sample_label.
  std::vector<FileSample> files() const;
  const std::shared_ptr<const data::SampleTable>& sample_table() const { return table_; }
  const std::string& idx_images_path() const { return idx_images_; }
  const std::string& idx_labels_path() const { return idx_labels_; }
  // Tar shards only (else null / empty): the index workers read through,
  // samples per shard in index order, the shuffle buffer.
  // Both wait for an index still built in the background (the returned
  // pointer is then shared by every copy of the dataset).
  const std::shared_ptr<const data::TarIndex>& tar_index() const;
  const std::vector<int64_t>& shard_sizes() const;
  // Tar shards indexed in the background (index_in_background) whose index
  // is not complete yet, else null; never waits.
  std::shared_ptr<data::ShardCounter> background_index() const;
  // Tar shards indexed in the background: the dataset as a Loader's workers
  // read it before the index is complete (no sizes; every sample named by
  // a ShardSample). OptionError for any other dataset.
  Dataset shard_named_view() const;
  // Tensor rows only (else null): the mapped rows workers copy from.
  const std::shared_ptr<const data::TensorRows>& tensor_rows() const { return rows_; }
  int64_t shuffle_buffer() const { return shuffle_buffer_; }

 private:
  enum class Kind { kFiles, kIdx, kTar, kRows };
  static Dataset from_tar_index(data::TarIndex index, ColorMode mode);
  static Dataset concat_tar(const std::vector<std::pair<Dataset, double>>& parts);
  static Dataset concat_files(const std::vector<std::pair<Dataset, double>>& parts);
  static Dataset from_table(std::shared_ptr<const data::SampleTable> table, ColorMode mode);
  void files_json(nlohmann::json& out) const;
  void files_from_json(const nlohmann::json& description);

  Kind kind_ = Kind::kFiles;
  ColorMode mode_ = ColorMode::kRGB;
  std::shared_ptr<const data::SampleTable> table_;
  std::vector<std::string> classes_;
  std::string idx_images_, idx_labels_;
  int64_t idx_count_ = 0;
  int image_height_ = 0, image_width_ = 0;
  std::shared_ptr<const data::TarIndex> tar_;
  // The index being built, when tar_ is not yet (index_in_background).
  std::shared_ptr<data::ShardCounter> counter_;
  const data::TarIndex& tar() const { return *tar_index(); }
  int64_t shuffle_buffer_ = 0;
  std::vector<MixPart> mix_;
  std::shared_ptr<const data::TensorRows> rows_;
  static Dataset from_rows(std::shared_ptr<const data::TensorRows> rows);
};

}  // namespace ringloader
