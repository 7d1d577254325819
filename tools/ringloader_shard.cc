// SPDX-License-Identifier: BSD-3-Clause
// ringloader-shard: turns a torchvision ImageFolder into WebDataset-style
// tar shards that Dataset::tar_shards reads.
//
//   ringloader-shard /data/train '/data/shards/train-%06d.tar' \
//       --max-count 10000 --max-size 1000000000 --shuffle --seed 0
//
// Each image becomes <n>.<ext> (its bytes as they are, n = its position in
// the written order, 6+ digits) plus <n>.cls holding its class index as
// text. Class names go to <first shard's folder>/classes.txt, one a line.
// A shard ends before it would pass --max-count samples or --max-size bytes.
//
// --max-side N re-encodes photos whose longer side exceeds N px, shrunk to
// N (FFCV's max_resolution); --quality Q (default 90) is their JPEG quality,
// and --reencode-all re-encodes every JPEG at Q. Both change pixels: see
// docs/transforms.md for the measured cost. Without them bytes are copied.
//
// The shard index (docs/tar_shards.md, "Shard index") goes next to the
// shards: OUT_PATTERN's name up to its %d field, trailing "-_." dropped,
// plus ".json" ('out/train-%06d.tar' -> out/train.json), or --index PATH.
// For shards made elsewhere, --index-only writes one by reading them once:
//
//   ringloader-shard --index-only train.json 'pipe:aws s3 cp s3://b/train-{0000..0999}.tar -'
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "loader/data/atomic_file.h"
#include "loader/data/files/image_folder_scan.h"
#include "loader/data/sample_source.h"
#include "loader/data/tar/tar_format.h"
#include "loader/data/tar/tar_index.h"
#include "loader/data/tar/tar_manifest.h"
#include "loader/data/tar/tar_writer.h"
#include "loader/sampler/sampler.h"
#include "ringloader/dataset.h"
#include "ringloader/errors.h"
#include "tools/shard_reencode.h"

namespace {

using ringloader::OptionError;

struct Arguments {
  std::string root;
  std::string pattern;
  int64_t max_count = 10000;
  uint64_t max_size = uint64_t{3} << 30;
  bool shuffle = false;
  uint64_t seed = 0;
  ringloader::tools::ReencodeOptions reencode;
  std::string index;                 // the shard index to write ("" : derived)
  bool index_only = false;           // --index-only: positional = URLs
  // --streams: shards --index-only reads at once.
  int streams = ringloader::TarShardOptions{}.index_streams;
  std::vector<std::string> urls;
};

const char kUsage[] =
    "usage: ringloader-shard ROOT OUT_PATTERN [--max-count N] "
    "[--max-size BYTES] [--shuffle] [--seed S]\n"
    "       [--max-side PX] [--quality Q] [--reencode-all] [--index PATH]\n"
    "       ringloader-shard --index-only INDEX.json [--streams N] URL...\n"
    "  OUT_PATTERN holds one printf integer, e.g. 'out/train-%06d.tar'\n"
    "  URL: a shard path, a brace pattern or pipe:<command>\n"
    "  --streams N: shards read at once (default 8)\n";

int64_t parse_positive(const char* text, const char* option) {
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value <= 0) {
    throw OptionError(std::string(option) + " needs a positive integer, got '" + text + "'");
  }
  return value;
}

// "%d", "%06d", ...: the only conversion snprintf may see with one int.
bool has_one_integer_field(const std::string& pattern) {
  size_t percent = pattern.find('%');
  if (percent == std::string::npos || pattern.find('%', percent + 1) != std::string::npos) {
    return false;
  }
  size_t end = pattern.find_first_not_of("0123456789", percent + 1);
  return end != std::string::npos && pattern[end] == 'd';
}

Arguments parse(int argc, char** argv) {
  Arguments args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw OptionError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--max-count") args.max_count = parse_positive(value(), "--max-count");
    else if (arg == "--max-size") args.max_size = parse_positive(value(), "--max-size");
    else if (arg == "--shuffle") args.shuffle = true;
    else if (arg == "--seed") args.seed = std::strtoull(value(), nullptr, 10);
    else if (arg == "--max-side") {
      args.reencode.max_side = static_cast<int>(parse_positive(value(), "--max-side"));
    } else if (arg == "--quality") {
      args.reencode.quality = static_cast<int>(parse_positive(value(), "--quality"));
      if (args.reencode.quality > 100) throw OptionError("--quality must be 1..100");
    } else if (arg == "--reencode-all") {
      args.reencode.reencode_all = true;
    }
    else if (arg == "--index") args.index = value();
    else if (arg == "--streams") {
      args.streams = static_cast<int>(std::min<int64_t>(parse_positive(value(), "--streams"), 256));
    }
    else if (arg == "--index-only") {
      args.index = value();
      args.index_only = true;
    }
    else if (arg == "-h" || arg == "--help") throw OptionError("");
    else if (!arg.empty() && arg[0] == '-') throw OptionError("unknown option " + arg);
    else positional.push_back(arg);
  }
  if (args.index_only) {
    if (positional.empty()) throw OptionError("--index-only needs the shards' URLs");
    args.urls = positional;
    return args;
  }
  if (positional.size() != 2) throw OptionError("expected ROOT and OUT_PATTERN");
  args.root = positional[0];
  args.pattern = positional[1];
  if (!has_one_integer_field(args.pattern)) {
    throw OptionError("OUT_PATTERN must hold exactly one %d-style field, e.g. %06d");
  }
  return args;
}

std::string shard_name(const std::string& pattern, int shard) {
  char name[4096];
  std::snprintf(name, sizeof(name), pattern.c_str(), shard);
  return name;
}

std::string lowercase_extension(const std::string& path) {
  size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  std::string extension = dot == std::string::npos ||
                                  (slash != std::string::npos && dot < slash)
                              ? ""
                              : path.substr(dot);
  for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return extension;
}

void write_classes(const std::string& first_shard,
                   const std::vector<std::string>& classes) {
  size_t slash = first_shard.rfind('/');
  std::string folder = slash == std::string::npos ? "." : first_shard.substr(0, slash);
  std::string text;
  for (const std::string& name : classes) text += name + "\n";
  ringloader::data::write_file_atomically(folder + "/classes.txt", text);
}

// out/train-%06d.tar -> out/train.json
std::string default_index_path(const std::string& pattern) {
  size_t slash = pattern.rfind('/');
  size_t start = slash == std::string::npos ? 0 : slash + 1;
  std::string stem = pattern.substr(start, pattern.find('%') - start);
  while (!stem.empty() && std::strchr("-_.", stem.back())) stem.pop_back();
  return pattern.substr(0, start) + (stem.empty() ? "index" : stem) + ".json";
}

// Written whole under a random name, then renamed: a reader never sees half
// an index, and nothing another user planted beside it is written through.
// Mode 0644 at most: an index that lists pipe: commands is run only when no
// one else may write it (tar_manifest.h).
void write_index(const std::string& path, const nlohmann::json& manifest) {
  ringloader::data::write_file_atomically(path, manifest.dump() + "\n", 0644);
}

// Reads each shard once (local ones by their headers) and writes its index.
// Local paths are written absolute, so the index holds wherever it goes.
int index_only(const Arguments& args) {
  std::vector<uint64_t> file_sizes;
  auto index = ringloader::data::index_tar_shards(args.urls, 0, {}, &file_sizes, args.streams);
  std::vector<std::string> urls;
  for (const std::string& shard : index.shards) {
    urls.push_back(ringloader::data::is_pipe_url(shard)
                       ? shard
                       : std::filesystem::absolute(shard).lexically_normal().string());
  }
  write_index(args.index, ringloader::data::tar_manifest_json(index, urls, file_sizes));
  std::printf("ringloader-shard: indexed %zu samples in %zu shards -> %s\n",
              static_cast<size_t>(index.size()), index.shards.size(), args.index.c_str());
  return 0;
}

// The shards just written, indexed by their headers; listed by file name,
// relative to the index beside them.
void index_written(const Arguments& args, int shards) {
  std::vector<std::string> paths, names;
  for (int s = 0; s < shards; ++s) {
    paths.push_back(shard_name(args.pattern, s));
    names.push_back(std::filesystem::path(paths.back()).filename().string());
  }
  std::vector<uint64_t> file_sizes;
  auto index = ringloader::data::index_tar_shards(paths, 0, {}, &file_sizes);
  std::string path = args.index.empty() ? default_index_path(args.pattern) : args.index;
  auto folder = std::filesystem::absolute(path).parent_path();
  for (int s = 0; s < shards; ++s) {
    auto shard = std::filesystem::absolute(paths[s]);
    if (shard.parent_path() != folder) names[s] = shard.lexically_normal().string();
  }
  write_index(path, ringloader::data::tar_manifest_json(index, names, file_sizes));
  std::printf("ringloader-shard: shard index -> %s\n", path.c_str());
}

int run(const Arguments& args) {
  if (args.index_only) return index_only(args);
  auto scan = ringloader::data::scan_image_folder(args.root);
  const int64_t n = static_cast<int64_t>(scan.samples.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  if (args.shuffle) {
    order = ringloader::sampler::shuffled_indices(n, args.seed, 0);
  } else {
    for (int64_t i = 0; i < n; ++i) order[i] = i;
  }
  const int digits = std::max<int>(6, static_cast<int>(std::to_string(n).size()));
  std::unique_ptr<ringloader::data::TarWriter> writer;
  int shards = 0;
  int64_t in_shard = 0;
  std::vector<uint8_t> bytes;
  int64_t reencoded = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  for (int64_t position = 0; position < n; ++position) {
    const auto& sample = scan.samples[order[position]];
    ringloader::data::read_file(sample.path, bytes);
    bytes_in += bytes.size();
    reencoded += ringloader::tools::reencode_photo(bytes, sample.path, args.reencode);
    bytes_out += bytes.size();
    std::string label = std::to_string(sample.label);
    uint64_t cost = 2 * ringloader::data::kTarBlock +
                    ringloader::data::tar_padded(bytes.size()) +
                    ringloader::data::tar_padded(label.size());
    if (!writer || in_shard >= args.max_count ||
        (in_shard > 0 && writer->bytes_written() + cost > args.max_size)) {
      if (writer) writer->close();
      writer = std::make_unique<ringloader::data::TarWriter>(shard_name(args.pattern, shards++));
      in_shard = 0;
    }
    char key[32];
    std::snprintf(key, sizeof(key), "%0*lld", digits, static_cast<long long>(position));
    writer->add(key + lowercase_extension(sample.path), bytes.data(), bytes.size());
    writer->add(std::string(key) + ".cls", label.data(), label.size());
    ++in_shard;
  }
  if (writer) writer->close();
  write_classes(shard_name(args.pattern, 0), scan.classes);
  if (shards > 0) index_written(args, shards);
  std::printf("ringloader-shard: %lld samples, %zu classes -> %d shards (%s)\n",
              static_cast<long long>(n), scan.classes.size(), shards,
              shard_name(args.pattern, 0).c_str());
  if (args.reencode.active()) {
    std::printf("ringloader-shard: re-encoded %lld photos; %.1f KiB -> %.1f KiB per sample\n",
                static_cast<long long>(reencoded), bytes_in / 1024.0 / std::max<int64_t>(1, n),
                bytes_out / 1024.0 / std::max<int64_t>(1, n));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const OptionError& error) {
    if (*error.what()) std::fprintf(stderr, "ringloader-shard: %s\n", error.what());
    std::fputs(kUsage, stderr);
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ringloader-shard: %s\n", error.what());
    return 1;
  }
}
