// SPDX-License-Identifier: BSD-3-Clause
// Scanning an ImageFolder the way torchvision does, so labels and sample
// order match torchvision.datasets.ImageFolder on the same tree.
#pragma once

#include <string>
#include <vector>

#include "ringloader/dataset.h"

namespace ringloader::data {

struct FolderScan {
  std::vector<std::string> classes;
  std::vector<FileSample> samples;
};

// torchvision's IMG_EXTENSIONS, compared case-insensitively.
bool has_image_extension(const std::string& path);

// Throws IoError: missing root, no class folders, a class folder with no
// image, unreadable folder. Symlinked folders are followed once (loops are
// detected by device and inode, not followed forever).
FolderScan scan_image_folder(const std::string& root);

}  // namespace ringloader::data
