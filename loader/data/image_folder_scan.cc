// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/image_folder_scan.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

struct Entry {
  std::string name;
  bool is_dir = false;
};

std::vector<Entry> list_directory(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (!dir) {
    throw IoError("ringloader: cannot read folder " + path + ": " +
                  std::strerror(errno));
  }
  std::vector<Entry> entries;
  while (dirent* item = readdir(dir)) {
    std::string name = item->d_name;
    if (name == "." || name == "..") continue;
    struct stat info {};
    // stat, not lstat: like os.walk(followlinks=True) and os.scandir's
    // is_dir(), symlinks count as what they point to.
    if (stat((path + "/" + name).c_str(), &info) != 0) continue;  // dangling
    entries.push_back({name, S_ISDIR(info.st_mode)});
  }
  closedir(dir);
  return entries;
}

using Inode = std::pair<dev_t, ino_t>;

// All folders under `root` (itself included), each visited once.
void collect_folders(const std::string& root, std::set<Inode>& seen,
                     std::vector<std::string>& folders) {
  struct stat info {};
  if (stat(root.c_str(), &info) != 0) return;
  if (!seen.insert({info.st_dev, info.st_ino}).second) return;  // a loop
  folders.push_back(root);
  for (const Entry& entry : list_directory(root)) {
    if (entry.is_dir) collect_folders(root + "/" + entry.name, seen, folders);
  }
}

std::vector<FileSample> scan_class(const std::string& folder, int64_t label) {
  std::set<Inode> seen;
  std::vector<std::string> folders;
  collect_folders(folder, seen, folders);
  // torchvision iterates sorted(os.walk(...)): folders by path, files by name.
  std::sort(folders.begin(), folders.end());
  std::vector<FileSample> samples;
  for (const std::string& path : folders) {
    std::vector<std::string> files;
    for (const Entry& entry : list_directory(path)) {
      if (!entry.is_dir && has_image_extension(entry.name)) {
        files.push_back(entry.name);
      }
    }
    std::sort(files.begin(), files.end());
    for (const std::string& name : files) {
      samples.push_back({path + "/" + name, label});
    }
  }
  return samples;
}

}  // namespace

bool has_image_extension(const std::string& path) {
  static const char* const kExtensions[] = {".jpg", ".jpeg", ".png",
                                            ".ppm", ".bmp",  ".pgm",
                                            ".tif", ".tiff", ".webp"};
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const char* extension : kExtensions) {
    size_t n = std::strlen(extension);
    if (lower.size() >= n && lower.compare(lower.size() - n, n, extension) == 0) {
      return true;
    }
  }
  return false;
}

FolderScan scan_image_folder(const std::string& root_in) {
  std::string root = root_in;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  struct stat info {};
  if (stat(root.c_str(), &info) != 0) {
    throw IoError("ringloader: dataset folder " + root + " does not exist: " +
                  std::strerror(errno));
  }
  if (!S_ISDIR(info.st_mode)) {
    throw IoError("ringloader: dataset path " + root + " is not a folder");
  }
  FolderScan scan;
  for (const Entry& entry : list_directory(root)) {
    if (entry.is_dir) scan.classes.push_back(entry.name);
  }
  std::sort(scan.classes.begin(), scan.classes.end());
  if (scan.classes.empty()) {
    throw IoError("ringloader: no class folder in dataset folder " + root +
                  " (ImageFolder expects root/<class>/<image>)");
  }
  for (size_t label = 0; label < scan.classes.size(); ++label) {
    std::string folder = root + "/" + scan.classes[label];
    auto samples = scan_class(folder, static_cast<int64_t>(label));
    if (samples.empty()) {
      throw IoError("ringloader: class folder " + folder +
                    " has no image file (extensions: .jpg .jpeg .png .ppm "
                    ".bmp .pgm .tif .tiff .webp)");
    }
    scan.samples.insert(scan.samples.end(), samples.begin(), samples.end());
  }
  return scan;
}

}  // namespace ringloader::data
