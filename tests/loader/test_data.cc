// SPDX-License-Identifier: BSD-3-Clause
#include "test_data.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

namespace ringloader::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") +
                        "/ringloader-test-XXXXXX";
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::string command = "rm -rf '" + path_ + "'";
  if (std::system(command.c_str()) != 0) {
    // Nothing to do: a leftover temp folder is not a test failure.
  }
}

void make_image_folder(const std::string& root, int classes, int per_class,
                       const std::string& extension, int min_side,
                       int max_side) {
  mkdir(root.c_str(), 0755);
  for (int c = 0; c < classes; ++c) {
    std::string folder = root + "/class_" + std::to_string(c);
    mkdir(folder.c_str(), 0755);
    for (int j = 0; j < per_class; ++j) {
      int span = max_side - min_side + 1;
      int height = min_side + (c * 7 + j * 13) % span;
      int width = min_side + (c * 11 + j * 5) % span;
      std::vector<unsigned char> pixels(static_cast<size_t>(height) * width * 3);
      for (int y = 0; y < height; ++y) {
        for (int x = 0; x < width; ++x) {
          unsigned char* pixel = &pixels[(static_cast<size_t>(y) * width + x) * 3];
          pixel[0] = static_cast<unsigned char>((x * y + c + j) & 255);
          pixel[1] = static_cast<unsigned char>((y * 7 + j * 17) & 255);
          pixel[2] = static_cast<unsigned char>((x * 9 + c * 40) & 255);
        }
      }
      char name[32];
      std::snprintf(name, sizeof(name), "%03d.", j);
      std::string path = folder + "/" + name + extension;
      bool written = extension == "png"
          ? stbi_write_png(path.c_str(), width, height, 3, pixels.data(), width * 3)
          : extension == "bmp"
              ? stbi_write_bmp(path.c_str(), width, height, 3, pixels.data())
              : stbi_write_jpg(path.c_str(), width, height, 3, pixels.data(), 92);
      if (!written) throw std::runtime_error("cannot write " + path);
    }
  }
}

std::string sibling_executable(const std::string& name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return name;
  const std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/')) + "/" + name;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

namespace {

int count_lines_with(const std::string& file, const std::string& needle) {
  std::ifstream in(file);
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    if (line.find(needle) != std::string::npos) ++count;
  }
  return count;
}

}  // namespace

int count_ringloader_fds() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  while (dirent* entry = readdir(dir)) {
    char target[512];
    std::string link = std::string("/proc/self/fd/") + entry->d_name;
    ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::string(target).find("memfd:ringloader") != std::string::npos) ++count;
  }
  closedir(dir);
  return count;
}

int count_ringloader_mappings() {
  return count_lines_with("/proc/self/maps", "memfd:ringloader");
}

LoaderOptions make_options(int batch_size, int num_workers) {
  LoaderOptions options;
  options.batch_size = batch_size;
  options.num_workers = num_workers;
  return options;
}

std::string child_ending(int pid, double timeout_s) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "hung";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

bool process_alive(int pid) {
  // A zombie still answers kill(0); look at its state instead.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string pid_field, name, state;
  stat >> pid_field >> name >> state;
  return state != "Z" && state != "X";
}

}  // namespace ringloader::testing
