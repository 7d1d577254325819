// SPDX-License-Identifier: BSD-3-Clause
// {"op": "Custom", "library": ..., "name": ..., ...}: ops from users' shared
// libraries (include/ringloader/custom_op.h). Each library is dlopen'ed once
// per process, by the path the pipeline names, and stays loaded: ops made
// from it may live as long as the process.
#include "transforms/custom_ops.h"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>

#include "ringloader/custom_op.h"
#include "ringloader/errors.h"

namespace ringloader::transforms {
namespace {

#define RINGLOADER_STRINGIFY2(x) #x
#define RINGLOADER_STRINGIFY(x) RINGLOADER_STRINGIFY2(x)
constexpr const char* kEntryPoint = RINGLOADER_STRINGIFY(RINGLOADER_CUSTOM_OPS_ENTRY);

class Registry final : public CustomOpRegistry {
 public:
  void add_factory(const char* name, Factory create) override {
    if (name && create) factories[name] = create;
  }
  std::map<std::string, Factory> factories;
};

// Path -> the factories its entry point registered.
const Registry& load_library(const std::string& path, const std::string& what) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Registry>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = loaded.find(path);
  if (found != loaded.end()) return *found->second;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* reason = dlerror();
    throw OptionError(what + ": cannot load library " + path + ": " +
                      (reason ? reason : "unknown error"));
  }
  using Entry = void (*)(CustomOpRegistry&);
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kEntryPoint));
  if (!entry) {
    dlclose(handle);
    throw OptionError(what + ": library " + path + " has no entry point " + kEntryPoint +
                      " (define it with RINGLOADER_CUSTOM_OPS(registry) { ... })");
  }
  auto registry = std::make_unique<Registry>();
  try {
    entry(*registry);
  } catch (const std::exception& error) {
    throw OptionError(what + ": " + kEntryPoint + " in " + path + " failed: " + error.what());
  }
  return *loaded.emplace(path, std::move(registry)).first->second;
}

class Random final : public CustomRandom {
 public:
  explicit Random(SampleRng& rng) : rng_(rng) {}
  double uniform() override { return rng_.uniform(); }
  int64_t integer(int64_t low, int64_t high) override { return rng_.integer(low, high); }

 private:
  SampleRng& rng_;
};

CustomImage view(Image& image) {
  return {image.height, image.width, image.channels, image.pixels.data()};
}

class CustomImageOp final : public ImageOp {
 public:
  CustomImageOp(std::unique_ptr<CustomOp> op, std::string what)
      : op_(std::move(op)), what_(std::move(what)) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    auto [height, width] = op_->output_size(in.height, in.width);
    if (height <= 0 || width <= 0) {
      throw Error(what_ + ": output_size(" + std::to_string(in.height) + ", " +
                  std::to_string(in.width) + ") is not a size");
    }
    out.reshape(height, width, in.channels);
    CustomImage source = view(in), target = view(out);
    Random random(rng);
    op_->apply(source, target, random);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    auto size = op_->output_size(height, width);
    return size.first > 0 && size.second > 0 ? size : std::pair<int, int>{0, 0};
  }

 private:
  std::unique_ptr<CustomOp> op_;
  std::string what_;
};

}  // namespace

std::unique_ptr<ImageOp> make_custom_op(OpParams& params) {
  const std::string library = params.text("library");
  const std::string name = params.text("name");
  const std::string what = "ringloader: pipeline op " + std::to_string(params.position()) +
                           " (Custom '" + name + "' from " + library + ")";
  const Registry& registry = load_library(library, what);
  auto factory = registry.factories.find(name);
  if (factory == registry.factories.end()) {
    std::string names;
    for (const auto& [known, unused] : registry.factories) {
      names += (names.empty() ? "" : ", ") + known;
    }
    throw OptionError(what + ": the library registers no op '" + name + "' (it has: " +
                      (names.empty() ? "none" : names) + ")");
  }
  std::unique_ptr<CustomOp> op;
  try {
    op.reset(factory->second(params.rest().dump().c_str()));
  } catch (const std::exception& error) {
    throw OptionError(what + ": bad parameters: " + error.what());
  }
  if (!op) throw OptionError(what + ": its factory returned no op");
  return std::make_unique<CustomImageOp>(std::move(op), what);
}

}  // namespace ringloader::transforms

namespace ringloader {

Op Custom(const std::string& library, const std::string& name, nlohmann::json params) {
  if (!params.is_object()) params = nlohmann::json::object();
  params["library"] = library;
  params["name"] = name;
  return {"Custom", std::move(params)};
}

}  // namespace ringloader
