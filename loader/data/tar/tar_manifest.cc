// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/tar_manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "loader/data/tar/brace_expand.h"
#include "loader/data/file_trust.h"
#include "loader/data/fetch/shard_input.h"
#include "loader/data/tar/tar_format.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char kHowToWrite[] =
    "write ringloader's full index once with "
    "`ringloader-shard --index-only INDEX.json URL...`";

// The manifest's text, and why the pipe: commands it lists may not run
// ("" when they may: file_trust.h).
struct ManifestSource {
  std::string text;
  std::string untrusted;
};

ManifestSource read_source(const std::string& source) {
  ManifestSource out;
  std::unique_ptr<ShardInput> input;
  try {
    if (is_pipe_url(source)) {
      input = open_shard(source);
      out.untrusted = "it is the output of a command, not a file of this user's";
    } else {
      const int fd = open(source.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) out.untrusted = why_file_is_untrusted(fd);
      input = std::make_unique<FileInput>(fd, source);
    }
  } catch (const IoError& error) {
    throw IoError("ringloader: cannot read shard index " + source + ": " + error.what());
  }
  uint8_t buffer[1 << 16];
  for (size_t got; (got = input->read(buffer, sizeof(buffer))) > 0;) {
    out.text.append(reinterpret_cast<const char*>(buffer), got);
  }
  return out;
}

// A pipe: shard the manifest lists (the caller gave no URLs) is a command
// the dataset names: it runs only from a file the caller could have written
// itself. URLs the caller passes are its own arguments and always run.
void check_listed_commands(const std::string& source, const std::string& untrusted,
                           const std::vector<std::string>& shards) {
  if (untrusted.empty()) return;
  for (const std::string& shard : shards) {
    if (!is_pipe_url(shard)) continue;
    throw IoError("ringloader: shard index " + source + " lists pipe: commands (\"" + shard +
                  "\"), which run only from an index file that no one but this user (or "
                  "root) may change, but " + untrusted + ". Pass the shard URLs yourself "
                  "(they are checked against the index), or make the file and its folders "
                  "yours and chmod go-w them");
  }
}

// Lexically absolute: the same file named two ways compares equal, without
// touching the file system (shards may not exist here, e.g. on a mount).
std::string normalize(const std::string& url, const fs::path& base) {
  if (is_pipe_url(url) || url.find("://") != std::string::npos) return url;
  fs::path path(url);
  if (path.is_relative()) path = base / path;
  return path.lexically_normal().string();
}

// Where the manifest's relative URLs start: wids's "base_path", else the
// manifest's folder (the working directory for a pipe: manifest).
fs::path url_base(const std::string& source, const json& manifest) {
  fs::path here = fs::current_path();
  fs::path folder = is_pipe_url(source) ? here : fs::absolute(source).parent_path();
  if (manifest.contains("base_path") && manifest["base_path"].is_string()) {
    fs::path base(manifest["base_path"].get<std::string>());
    return base.is_relative() ? folder / base : base;
  }
  return folder;
}

class ManifestReader {
 public:
  ManifestReader(const std::string& source, TarIndex& index, TarSampleTableBuilder& samples)
      : source_(source), index_(index), samples_(samples) {}

  [[noreturn]] void fail(const std::string& reason) const {
    throw IoError("ringloader: shard index " + source_ + ": " + reason);
  }

  // Whether the manifest counts samples only (a plain wids index).
  bool check_kind(const json& manifest) const {
    if (!manifest.is_object()) fail("not a JSON object");
    if (manifest.value("__kind__", json()) != kWidsKind) {
      fail("\"__kind__\" is not \"" + std::string(kWidsKind) + "\"");
    }
    if (!manifest.contains("shardlist") || !manifest["shardlist"].is_array()) {
      fail("no \"shardlist\" array");
    }
    json version = manifest.value("ringloader_index", json());
    if (version.is_null()) return true;
    if (version != kRingloaderIndexVersion) {
      fail("\"ringloader_index\" is " + version.dump() + ", this ringloader reads version " +
           std::to_string(kRingloaderIndexVersion));
    }
    return false;
  }

  // A counts-only shard's samples are found by the worker that streams it
  // (tar_member_reader.h), which a pipe: shard read without a cache is.
  void check_counted_shard(const std::string& url, const ShardCacheOptions& cache) const {
    std::string why;
    if (!is_pipe_url(url) && url.find("://") != std::string::npos) {
      // WebDataset opens http(s) URLs with curl itself; here the index
      // must name the command, as the URLs given to TarShards do.
      why = "shard " + url + " is not a pipe: command (list it as one in the index, e.g. "
            "\"pipe:curl -sfL " + url + "\", or ";
    } else if (!is_pipe_url(url)) {
      why = "shard " + url + " is a local file (local shards are indexed from their headers "
            "in moments: leave out the index, or ";
    } else if (cache.enabled()) {
      why = "its pipe: shards are read through the shard cache " + cache.dir + " (";
    } else {
      return;
    }
    throw OptionError("ringloader: shard index " + source_ +
                      " holds sample counts only (a plain wids index), which serves pipe: "
                      "shards streamed without a cache, but " + why + kHowToWrite + ")");
  }

  // Shard `shard`'s samples of a counts-only index: numbered, not placed.
  void add_counted_shard(const json& entry, int32_t shard, uint64_t& file_size) {
    const std::string where = "shard " + std::to_string(shard);
    if (!entry.is_object()) fail(where + ": not an object");
    const int64_t count = integer(entry, "nsamples", where);
    file_size = entry.contains("filesize")
                    ? static_cast<uint64_t>(integer(entry, "filesize", where)) : 0;
    // Nothing else bounds the table a count asks for: each sample takes a
    // header and a data block at least, and a shard of WebDataset's holds
    // thousands of samples, not millions.
    constexpr int64_t kMaxCountedPerShard = int64_t{1} << 24;
    const int64_t most = file_size > 0 ? static_cast<int64_t>(file_size / (2 * kTarBlock))
                                       : kMaxCountedPerShard;
    if (count > std::min(most, kMaxCountedPerShard) ||
        static_cast<int64_t>(samples_.size()) + count > (int64_t{1} << 31)) {
      fail(where + ": \"nsamples\" " + std::to_string(count) + " is more than " +
           (file_size > 0 ? "its filesize " + std::to_string(file_size) + " holds"
                          : "a shard holds (" + std::to_string(kMaxCountedPerShard) + ")"));
    }
    TarSample sample;
    sample.shard = shard;
    sample.offset = kUnplacedOffset;
    for (int64_t i = 0; i < count; ++i) samples_.add(sample);
    index_.shard_sizes.push_back(count);
  }

  // Appends shard `shard`'s samples from its entry, checking every field.
  void add_shard(const json& entry, int32_t shard, uint64_t& file_size) {
    const std::string where = "shard " + std::to_string(shard);
    if (!entry.is_object()) fail(where + ": not an object");
    int64_t count = integer(entry, "nsamples", where);
    int64_t bytes = entry.contains("filesize") ? integer(entry, "filesize", where) : 0;
    file_size = static_cast<uint64_t>(bytes);
    if (!entry.contains("ringloader") || !entry["ringloader"].is_object()) {
      fail(where + ": no \"ringloader\" member table");
    }
    const json& table = entry["ringloader"];
    const json* columns[4];
    const char* names[4] = {"offsets", "sizes", "labels", "names"};
    for (int c = 0; c < 4; ++c) {
      if (!table.contains(names[c]) || !table[names[c]].is_array()) {
        fail(where + ": no \"" + names[c] + "\" array");
      }
      columns[c] = &table[names[c]];
      if (static_cast<int64_t>(columns[c]->size()) != count) {
        fail(where + ": \"nsamples\" is " + std::to_string(count) + " but \"" + names[c] +
             "\" holds " + std::to_string(columns[c]->size()));
      }
    }
    uint64_t end = 0;  // where the previous member's data ended
    for (int64_t i = 0; i < count; ++i) {
      TarSample sample;
      sample.shard = shard;
      sample.offset = unsigned_at(*columns[0], i, where, "offsets");
      sample.size = unsigned_at(*columns[1], i, where, "sizes");
      const json& label = (*columns[2])[static_cast<size_t>(i)];
      const json& name = (*columns[3])[static_cast<size_t>(i)];
      if (!label.is_number_integer()) fail(where + ": label " + std::to_string(i) + " is not an integer");
      if (!name.is_string() || name.get_ref<const std::string&>().empty()) {
        fail(where + ": name " + std::to_string(i) + " is not a member name");
      }
      sample.label = label.get<int64_t>();
      sample.image_name = name.get<std::string>();
      // A member's data follows its own 512-byte header, block aligned.
      if (sample.offset % kTarBlock != 0 || sample.offset < end + kTarBlock ||
          sample.size > std::numeric_limits<uint64_t>::max() - sample.offset) {
        fail(where + ": member '" + sample.image_name + "' offset " +
             std::to_string(sample.offset) + " is not after the previous member");
      }
      if (bytes > 0 && sample.offset + sample.size > file_size) {
        fail(where + ": member '" + sample.image_name + "' at offset " +
             std::to_string(sample.offset) + " (" + std::to_string(sample.size) +
             " bytes) is past its filesize " + std::to_string(file_size));
      }
      end = sample.offset + tar_padded(sample.size);
      samples_.add(sample);
    }
    index_.shard_sizes.push_back(count);
  }

 private:
  int64_t integer(const json& entry, const char* key, const std::string& where) const {
    if (!entry.contains(key) || !entry[key].is_number_integer() || entry[key].get<int64_t>() < 0) {
      fail(where + ": \"" + key + "\" is not a non-negative integer");
    }
    return entry[key].get<int64_t>();
  }

  uint64_t unsigned_at(const json& column, int64_t i, const std::string& where,
                       const char* key) const {
    const json& value = column[static_cast<size_t>(i)];
    if (!value.is_number_unsigned()) {
      fail(where + ": \"" + key + "\"[" + std::to_string(i) + "] is not a non-negative integer");
    }
    return value.get<uint64_t>();
  }

  const std::string& source_;
  TarIndex& index_;
  TarSampleTableBuilder& samples_;
};

// The manifest may be right yet the shard changed since: a local one's size
// is checked here (a pipe: one's members, by the worker that streams it).
void check_local_size(const TarIndex& index, int32_t shard, uint64_t file_size) {
  const std::string& url = index.shards[shard];
  if (file_size == 0 || is_pipe_url(url)) return;
  struct stat info {};
  if (stat(url.c_str(), &info) != 0) return;  // reading it will name the error
  if (static_cast<uint64_t>(info.st_size) != file_size) {
    throw IoError("ringloader: shard " + url + ": stale index " + index.manifest +
                  ": the shard is " + std::to_string(info.st_size) +
                  " bytes, the index says " + std::to_string(file_size) +
                  "; write the index again");
  }
}

}  // namespace

json tar_manifest_json(const TarIndex& index, const std::vector<std::string>& urls,
                       const std::vector<uint64_t>& file_sizes) {
  json shardlist = json::array();
  int64_t sample = 0;
  for (size_t shard = 0; shard < index.shards.size(); ++shard) {
    json offsets = json::array(), sizes = json::array(), labels = json::array(),
         names = json::array();
    for (int64_t i = 0; i < index.shard_sizes[shard]; ++i, ++sample) {
      const TarSample s = index.sample(sample);
      offsets.push_back(s.offset);
      sizes.push_back(s.size);
      labels.push_back(s.label);
      names.push_back(s.image_name);
    }
    shardlist.push_back({{"url", urls[shard]},
                         {"nsamples", index.shard_sizes[shard]},
                         {"filesize", file_sizes[shard]},
                         {"ringloader", {{"offsets", std::move(offsets)},
                                         {"sizes", std::move(sizes)},
                                         {"labels", std::move(labels)},
                                         {"names", std::move(names)}}}});
  }
  return {{"__kind__", kWidsKind},
          {"wids_version", 1},
          {"ringloader_index", kRingloaderIndexVersion},
          {"shardlist", std::move(shardlist)}};
}

TarIndex load_tar_manifest(const std::string& source, const std::vector<std::string>& urls,
                           int64_t shuffle_buffer, const ShardCacheOptions& cache) {
  if (shuffle_buffer < 0) {
    throw OptionError("ringloader: shuffle_buffer must be >= 0, got " +
                      std::to_string(shuffle_buffer));
  }
  TarIndex index;
  index.shuffle_buffer = shuffle_buffer;
  index.cache = cache;
  index.manifest = source;
  TarSampleTableBuilder samples;
  ManifestReader reader(source, index, samples);
  ManifestSource read = read_source(source);
  json manifest = json::parse(read.text, nullptr, /*allow_exceptions=*/false);
  read.text = std::string();
  if (manifest.is_discarded()) reader.fail("not valid JSON");
  const bool counts_only = reader.check_kind(manifest);
  index.has_unplaced = counts_only;
  const json& shardlist = manifest["shardlist"];
  if (shardlist.empty()) reader.fail("the shard list is empty");
  if (shardlist.size() > (size_t{1} << 31) - 1) reader.fail("too many shards");
  std::vector<uint64_t> file_sizes(shardlist.size(), 0);
  const fs::path base = url_base(source, manifest);
  for (size_t s = 0; s < shardlist.size(); ++s) {
    const json& entry = shardlist[s];
    if (!entry.is_object() || !entry.contains("url") || !entry["url"].is_string()) {
      reader.fail("shard " + std::to_string(s) + ": no \"url\" string");
    }
    index.shards.push_back(normalize(entry["url"].get<std::string>(), base));
    if (counts_only) {
      reader.check_counted_shard(index.shards.back(), cache);
      reader.add_counted_shard(entry, static_cast<int32_t>(s), file_sizes[s]);
    } else {
      reader.add_shard(entry, static_cast<int32_t>(s), file_sizes[s]);
    }
  }
  std::vector<std::string> given, given_as_written;
  for (const std::string& url : urls) {
    for (std::string& shard : expand_braces(url)) {
      given.push_back(normalize(shard, fs::current_path()));
      given_as_written.push_back(std::move(shard));
    }
  }
  if (!given.empty() && given != index.shards) {
    size_t differ = 0;
    while (differ < given.size() && differ < index.shards.size() &&
           given[differ] == index.shards[differ]) {
      ++differ;
    }
    throw OptionError(
        "ringloader: shard index " + source + " lists " + std::to_string(index.shards.size()) +
        " shards, the URLs give " + std::to_string(given.size()) + "; first difference at shard " +
        std::to_string(differ) + ": '" +
        (differ < given.size() ? given[differ] : std::string("(none)")) + "' given, '" +
        (differ < index.shards.size() ? index.shards[differ] : std::string("(none)")) +
        "' indexed");
  }
  // Named as the caller names them, as an index made by streaming would be.
  if (!given.empty()) {
    index.shards = std::move(given_as_written);
  } else {
    check_listed_commands(source, read.untrusted, index.shards);
  }
  if (samples.size() == 0) reader.fail("the shards hold no sample");
  index.shard_bytes.assign(index.shards.size(), 0);
  for (size_t s = 0; s < index.shards.size(); ++s) {
    check_local_size(index, static_cast<int32_t>(s), file_sizes[s]);
    // A fetch into the shard cache is checked against the recorded size.
    if (cache.enabled()) index.shard_bytes[s] = file_sizes[s];
  }
  manifest = json();  // its DOM is the largest transient copy; free it before the table
  index.table = TarSampleTable::build(std::move(samples), index.shards.size());
  return index;
}

}  // namespace ringloader::data
