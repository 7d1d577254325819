// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/files/image_folder_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "loader/data/fd.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

const std::vector<std::string> kImageExtensions = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                                   ".pgm", ".tif",  ".tiff", ".webp"};

// One folder's entries: names packed into one string (a million small
// std::strings would cost more than the names).
struct Listing {
  std::string names;
  std::vector<std::pair<uint32_t, uint32_t>> files, dirs;  // (offset, length)
  std::string_view at(std::pair<uint32_t, uint32_t> span) const {
    return {names.data() + span.first, span.second};
  }
};

// An entry is a folder when its type says so; a symlink (or a file system
// that does not fill d_type) is stat-ed to what it points to, as
// os.scandir's is_dir() does. A dangling link is a file, as in os.walk.
bool is_folder(int dir_fd, const char* name, unsigned char type) {
  if (type == DT_DIR) return true;
  if (type != DT_LNK && type != DT_UNKNOWN) return false;
  struct stat info {};
  return fstatat(dir_fd, name, &info, 0) == 0 && S_ISDIR(info.st_mode);
}

// Lists `path` with getdents64 and a large buffer (few system calls for a
// folder of a thousand files).
Listing list_folder(int fd, const std::string& path) {
  Listing listing;
  std::vector<char> buffer(256 * 1024);
  for (;;) {
    const long got = syscall(SYS_getdents64, fd, buffer.data(), buffer.size());
    if (got < 0) {
      throw IoError("ringloader: cannot read folder " + path + ": " + std::strerror(errno));
    }
    if (got == 0) break;
    for (long at = 0; at < got;) {
      // struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name.
      const char* record = buffer.data() + at;
      uint16_t length = 0;
      std::memcpy(&length, record + 16, sizeof length);
      const auto type = static_cast<unsigned char>(record[18]);
      const char* name = record + 19;
      at += length;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      const std::pair<uint32_t, uint32_t> span{static_cast<uint32_t>(listing.names.size()),
                                               static_cast<uint32_t>(std::strlen(name))};
      listing.names.append(name, span.second);
      (is_folder(fd, name, type) ? listing.dirs : listing.files).push_back(span);
    }
  }
  return listing;
}

struct ClassFolder {
  std::vector<std::pair<std::string, Listing>> folders;  // (path, entries)
  size_t files = 0;
};

using Inode = std::pair<dev_t, ino_t>;

// Every folder under `path` (itself included), each listed once.
void walk(const std::string& path, std::set<Inode>& seen, ClassFolder& out) {
  Fd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    throw IoError("ringloader: cannot read folder " + path + ": " + std::strerror(errno));
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0 || !seen.insert({info.st_dev, info.st_ino}).second) {
    return;  // a loop back to a folder already walked
  }
  Listing listing = list_folder(fd.get(), path);
  std::vector<std::string> children;
  for (const auto& span : listing.dirs) children.push_back(path + "/" + std::string(listing.at(span)));
  out.files += listing.files.size();
  out.folders.emplace_back(path, std::move(listing));
  for (const std::string& child : children) walk(child, seen, out);
}

bool wanted(std::string_view name, const FolderScanOptions& options) {
  if (options.all_files) return true;
  // torchvision: filename.lower().endswith(tuple(extensions)).
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const auto& extensions = options.extensions.empty() ? kImageExtensions : options.extensions;
  for (const std::string& extension : extensions) {
    if (lower.size() >= extension.size() &&
        lower.compare(lower.size() - extension.size(), extension.size(), extension) == 0) {
      return true;
    }
  }
  return false;
}

// torchvision iterates sorted(os.walk(...)): folders by path, files by name;
// only the wanted files are kept.
void sort_and_filter(ClassFolder& folder, const FolderScanOptions& options) {
  std::sort(folder.folders.begin(), folder.folders.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  folder.files = 0;
  for (auto& entry : folder.folders) {
    // A named reference, not a structured binding: lambdas may capture
    // those only from C++20 on, and clang holds C++17 to that.
    auto& listing = entry.second;
    auto& files = listing.files;
    files.erase(std::remove_if(files.begin(), files.end(),
                               [&](const auto& span) { return !wanted(listing.at(span), options); }),
                files.end());
    std::sort(files.begin(), files.end(),
              [&](const auto& a, const auto& b) { return listing.at(a) < listing.at(b); });
    listing.dirs.clear();
    folder.files += files.size();
  }
}

std::string describe_extensions(const FolderScanOptions& options) {
  if (options.all_files) return "any file";
  std::string text = "extensions:";
  for (const auto& e : options.extensions.empty() ? kImageExtensions : options.extensions) {
    text += " " + e;
  }
  return text;
}

std::vector<std::string> list_classes(const std::string& root) {
  Fd fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    throw IoError("ringloader: dataset folder " + root + " cannot be read: " +
                  std::strerror(errno));
  }
  Listing listing = list_folder(fd.get(), root);
  std::vector<std::string> classes;
  for (const auto& span : listing.dirs) classes.emplace_back(listing.at(span));
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) {
    throw IoError("ringloader: no class folder in dataset folder " + root +
                  " (ImageFolder expects root/<class>/<image>)");
  }
  return classes;
}

// Scans every class folder on `threads` threads; results stay in class order.
std::vector<ClassFolder> scan_classes(const std::string& root,
                                      const std::vector<std::string>& classes,
                                      const FolderScanOptions& options) {
  std::vector<ClassFolder> out(classes.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_lock;
  auto work = [&] {
    for (size_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < classes.size();) {
      try {
        std::set<Inode> seen;
        walk(root + "/" + classes[c], seen, out[c]);
        sort_and_filter(out[c], options);
      } catch (...) {
        std::lock_guard<std::mutex> hold(failure_lock);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  unsigned threads = options.threads > 0 ? static_cast<unsigned>(options.threads)
                     : std::min(16u, std::max(4u, std::thread::hardware_concurrency()));
  threads = std::min<unsigned>(threads, static_cast<unsigned>(classes.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace

bool has_image_extension(const std::string& path) { return wanted(path, FolderScanOptions{}); }

std::shared_ptr<const SampleTable> scan_image_folder_table(const std::string& root_in,
                                                           const FolderScanOptions& options) {
  std::string root = root_in;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  struct stat info {};
  if (stat(root.c_str(), &info) != 0) {
    throw IoError("ringloader: dataset folder " + root + " does not exist: " +
                  std::strerror(errno));
  }
  if (!S_ISDIR(info.st_mode)) throw IoError("ringloader: dataset path " + root + " is not a folder");
  const std::vector<std::string> classes = list_classes(root);
  std::vector<ClassFolder> scanned = scan_classes(root, classes, options);
  SampleTableBuilder builder;
  for (size_t label = 0; label < classes.size(); ++label) {
    builder.add_class(classes[label]);
    ClassFolder& folder = scanned[label];
    if (folder.files == 0) {
      throw IoError("ringloader: class folder " + root + "/" + classes[label] +
                    " has no image file (" + describe_extensions(options) + ")");
    }
    for (auto& [path, listing] : folder.folders) {
      if (listing.files.empty()) continue;
      const uint32_t id = builder.folder(path + "/");
      for (const auto& span : listing.files) {
        builder.add(id, listing.at(span), static_cast<int64_t>(label));
      }
    }
    folder = ClassFolder{};  // freed as it goes: the builder holds it now
  }
  return SampleTable::build(std::move(builder));
}

FolderScan scan_image_folder(const std::string& root) {
  auto table = scan_image_folder_table(root);
  FolderScan scan;
  scan.classes = table->classes();
  for (int64_t i = 0; i < table->size(); ++i) {
    scan.samples.push_back({table->path(i), table->label(i)});
  }
  return scan;
}

}  // namespace ringloader::data
