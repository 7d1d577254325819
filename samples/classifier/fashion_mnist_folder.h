// SPDX-License-Identifier: BSD-3-Clause
// Fashion-MNIST as a PNG ImageFolder: the IDX files are read once through a
// ringloader Loader (Dataset::idx with an empty pipeline gives uint8 pixels)
// and written to <cache>/fashion-mnist-png/{train,test}/<k>_<class>/<n>.png.
#pragma once

#include <string>
#include <vector>

namespace classifier {

// Folder names sort in label order ("0_T-shirt_top" ... "9_Ankle_boot"), so
// ImageFolder's labels equal the IDX labels.
const std::vector<std::string>& fashion_mnist_class_folders();

// The export's root (holding train/ and test/). Reuses a complete export
// (one whose marker file exists); a partial one, left by an interrupted run,
// is deleted and redone. The export is built in a temporary folder and
// renamed into place, so concurrent runs never see half of one.
// Throws classifier::UsageError if the IDX files are missing.
std::string ensure_fashion_mnist_png(const std::string& idx_dir,
                                     const std::string& cache_dir);

// "~/.cache/ringloader" (or $XDG_CACHE_HOME/ringloader).
std::string default_cache_dir();

// "3_Dress" -> "Dress"; other names are returned unchanged.
std::string display_class_name(const std::string& folder_name);

}  // namespace classifier
