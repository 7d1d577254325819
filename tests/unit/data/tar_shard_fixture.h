// SPDX-License-Identifier: BSD-3-Clause
// Shards and shard index files made in a test's own folder, for the tests
// of the shard index (tar_manifest_test.cc, tar_counted_index_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/data/tar/tar_index.h"
#include "loader/data/tar/tar_manifest.h"
#include "loader/data/tar/tar_writer.h"
#include "ringloader/errors.h"
#include "tests/unit/temp_dir_test.h"

namespace ringloader::data {

class TarShardTest : public TempDirTest {
 protected:
  // <key>.jpg holds "<tag><n>" padded to a varying size; <key>.cls n % 7.
  std::string make_shard(const std::string& name, int first, int count,
                         const std::string& tag = "img") {
    std::string path = dir_ + "/" + name;
    TarWriter writer(path);
    for (int n = first; n < first + count; ++n) {
      char key[16];
      std::snprintf(key, sizeof(key), "%06d", n);
      std::string image = tag + std::to_string(n) + std::string(n * 37 % 900, 'x');
      std::string label = std::to_string(n % 7);
      writer.add(std::string(key) + ".jpg", image.data(), image.size());
      writer.add(std::string(key) + ".cls", label.data(), label.size());
    }
    writer.close();
    return path;
  }
  // Indexes `urls` by reading them and writes the index to `name`.
  std::string write_manifest(const std::vector<std::string>& urls,
                             const std::string& name = "index.json") {
    std::vector<uint64_t> sizes;
    TarIndex index = index_tar_shards(urls, 0, {}, &sizes);
    return write_json(tar_manifest_json(index, index.shards, sizes), name);
  }
  std::string write_json(const nlohmann::json& manifest, const std::string& name = "index.json") {
    return write_text(manifest.dump(), name);
  }
  std::string write_text(const std::string& text, const std::string& name) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }
  // The error load_tar_manifest throws, as "<type>: <message>".
  static std::string load_error(const std::string& manifest,
                                const std::vector<std::string>& urls = {}) {
    try {
      load_tar_manifest(manifest, urls, 0);
    } catch (const OptionError& error) {
      return std::string("OptionError: ") + error.what();
    } catch (const IoError& error) {
      return std::string("IoError: ") + error.what();
    }
    return "(no error)";
  }
};

}  // namespace ringloader::data
