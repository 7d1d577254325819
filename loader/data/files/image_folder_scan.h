// SPDX-License-Identifier: BSD-3-Clause
// Folder loader/data/files/: datasets of plain files. ImageFolder scans
// (this file), file lists (file_dataset.cc) and IDX files (idx_file,
// MNIST and its family).
//
// Scanning an ImageFolder the way torchvision does, so labels and sample
// order match torchvision.datasets.ImageFolder on the same tree, into the
// shared sample table. Class folders are listed in parallel (getdents64,
// the entry's own type; only symlinks and unknown types are stat-ed).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loader/data/tables/sample_table.h"
#include "ringloader/dataset.h"

namespace ringloader::data {

struct FolderScan {
  std::vector<std::string> classes;
  std::vector<FileSample> samples;
};

struct FolderScanOptions {
  // torchvision's has_file_allowed_extension: the lower-cased file name
  // ends with one of these, compared as given. Default: empty, torchvision's
  // IMG_EXTENSIONS.
  std::vector<std::string> extensions;
  // Every non-folder entry (a Python is_valid_file filters afterwards);
  // a class folder with no entry at all is still an error. Default: false.
  bool all_files = false;
  // Threads listing class folders. Default: 0, max(4, online cores), at
  // most 16 (listing waits on the file system as much as on a core).
  int threads = 0;
};

// torchvision's IMG_EXTENSIONS, compared case-insensitively.
bool has_image_extension(const std::string& path);

// Throws IoError: missing root, no class folders, a class folder with no
// (matching) file, unreadable folder. Symlinks count as what they point to
// (os.walk(followlinks=True)); a dangling one is a file, as in os.walk.
// Symlinked folders are followed once per class (loops are detected by
// device and inode, not followed).
std::shared_ptr<const SampleTable> scan_image_folder_table(
    const std::string& root, const FolderScanOptions& options = {});

// The same scan as plain vectors (for ringloader-shard).
FolderScan scan_image_folder(const std::string& root);

}  // namespace ringloader::data
