// SPDX-License-Identifier: BSD-3-Clause
// Folder loader/data/: what every source of samples shares. The Dataset
// descriptions (dataset.cc), reading one sample into pixels (this file),
// and files made and opened safely (fd.h, atomic_file, file_trust,
// folder_walk). One subfolder per source of samples:
//   tar/     tar shards and their index    fetch/  shard bytes and the node cache
//   tables/  sealed sample tables          files/  image folders and IDX files
//   mix/     weighted mixes of the others
// A subfolder may include this folder and tables/; this folder includes
// only what SampleSource reads.
//
// Reading one sample of a Dataset into a decoded 8-bit image: the first
// stage of a sample's trip (file -> bytes -> pixels), before the pipeline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/data/files/idx_file.h"
#include "loader/data/tar/tar_member_reader.h"
#include "loader/data/tables/tensor_rows.h"
#include "ringloader/dataset.h"
#include "transforms/decode/decode.h"
#include "transforms/image.h"

namespace ringloader::data {

// Nanoseconds spent per stage, added to by load().
struct SampleTiming {
  uint64_t read_ns = 0;
  uint64_t decode_ns = 0;
};

class SampleSource {
 public:
  SampleSource(Dataset dataset, transforms::DecodeLimits limits);

  int64_t size() const { return dataset_.size(); }
  ColorMode color_mode() const { return dataset_.color_mode(); }
  // "sample 17 (/data/cat/3.jpg)": what error messages name.
  std::string describe(int64_t index) const;

  // Decodes sample `index` into `image` and returns its label. `file_bytes`
  // is the caller's reusable read buffer. `region` (the pipeline's, see
  // CompiledPipeline::region_planner) lets a decoder decode only what the
  // first op reads. Throws IoError / DecodeError naming the sample and file.
  // Shards this process fetched into the shard cache, and their bytes
  // (0 without a cache).
  int64_t shard_fetches() const;
  uint64_t shard_bytes_fetched() const;

  // Tensor rows (Dataset::tensor_rows) have no image: copy_row writes
  // sample `index`'s row straight to `destination` and returns its label
  // (IoError naming the sample when it is outside).
  bool copies_rows() const { return dataset_.tensor_rows() != nullptr; }
  int64_t copy_row(int64_t index, uint8_t* destination) const;

  // The key of sample `index`'s random stream (SampleRng): its dataset
  // index, or for tar shards its ShardSample name, which a first epoch read
  // while the shards are still being indexed also knows (TarIndex::
  // streamed): its draws are those of an indexed epoch.
  uint64_t random_key(int64_t index) const;

  int64_t load(int64_t index, transforms::Image& image,
               std::vector<uint8_t>& file_bytes, SampleTiming& timing,
               const transforms::RegionPlanner& region = {}) const;

 private:
  // A file or a tar member: read the encoded bytes, then decode them.
  int64_t load_encoded(int64_t index, transforms::Image& image,
                       std::vector<uint8_t>& file_bytes, SampleTiming& timing,
                       const transforms::RegionPlanner& region) const;
  // The encoded bytes of sample `index`; returns its label.
  int64_t read_encoded(int64_t index, std::vector<uint8_t>& file_bytes) const;
  int64_t load_idx(int64_t index, transforms::Image& image) const;

  Dataset dataset_;
  transforms::DecodeLimits limits_;
  IdxArray idx_images_;
  IdxArray idx_labels_;
  std::unique_ptr<TarMemberReader> tar_reader_;  // tar shards only
  // Tar shards still being indexed: samples are named by shard (ShardSample).
  bool streamed_ = false;
  bool in_range(int64_t index) const;
};

// Reads a whole file; throws IoError naming it (missing, unreadable, empty).
void read_file(const std::string& path, std::vector<uint8_t>& out);

}  // namespace ringloader::data
