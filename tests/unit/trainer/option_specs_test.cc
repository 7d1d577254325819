// SPDX-License-Identifier: BSD-3-Clause
// The loader option table: names, types, defaults and rules of every
// LoaderOptions field, in one place (loader/trainer/option_specs.cc).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ringloader/errors.h"
#include "ringloader/option_specs.h"

namespace ringloader {
namespace {

using nlohmann::json;

// The OptionError text `set` throws, or "" when it does not throw.
std::string error_of(const std::string& name, const json& value) {
  LoaderOptions options;
  try {
    set_loader_option(options, name, value);
  } catch (const OptionError& e) {
    return e.what();
  }
  return "";
}

TEST(OptionSpecs, DefaultsAreLoaderOptionsDefaults) {
  const json specs = loader_option_specs_json();
  const json defaults = loader_options_to_json(LoaderOptions{});
  std::set<std::string> names;
  for (const json& spec : specs) {
    const std::string name = spec["name"];
    EXPECT_TRUE(names.insert(name).second) << "twice in the table: " << name;
    EXPECT_EQ(spec["default"], defaults[name]) << name;
    EXPECT_FALSE(spec["doc"].get<std::string>().empty()) << name;
  }
  EXPECT_EQ(names.size(), defaults.size());
  EXPECT_EQ(defaults["hang_timeout_s"], 120.0);
  EXPECT_EQ(defaults["held_batches"], "spill");
  EXPECT_EQ(defaults["on_error"], "raise");
  EXPECT_EQ(defaults["device"], "cpu");
  EXPECT_EQ(defaults["worker_nice"], 0);
}

TEST(OptionSpecs, RoundTripsEveryField) {
  LoaderOptions options;
  options.batch_size = 7;
  options.num_workers = LoaderOptions::kAutoWorkers;
  options.ring_memory_budget_bytes = ~uint64_t{0};
  options.shuffle = true;
  options.held_batches = HeldBatches::kRaise;
  options.seed = ~uint64_t{0};
  options.worker_executable = "/bin/worker";
  options.hang_timeout_s = 2.5;
  options.on_error = OnError::kSkip;
  options.rank = 3;
  options.world_size = 4;
  options.device = "cuda:1";
  options.device_normalize_mean = {0.5, 0.25};
  const json text = loader_options_to_json(options);
  const LoaderOptions back = loader_options_from_json(json::parse(text.dump()));
  EXPECT_EQ(loader_options_to_json(back), text);
  EXPECT_EQ(back.seed, ~uint64_t{0});
  EXPECT_EQ(back.held_batches, HeldBatches::kRaise);
  EXPECT_EQ(back.on_error, OnError::kSkip);
  EXPECT_EQ(back.device_normalize_mean, (std::vector<double>{0.5, 0.25}));
}

TEST(OptionSpecs, UnknownOptionIsNamed) {
  EXPECT_EQ(error_of("hang_timeout", 5), "ringloader: unknown loader option 'hang_timeout'");
  EXPECT_THROW(loader_options_from_json(json{{"batch_size", 2}, {"bogus", 1}}), OptionError);
  EXPECT_THROW(loader_options_from_json(json::array()), OptionError);
}

TEST(OptionSpecs, MistypedOptionIsNamed) {
  const std::pair<std::string, json> cases[] = {
      {"batch_size", "8"},      {"batch_size", 2.5},        {"batch_size", true},
      {"num_workers", int64_t{1} << 40}, {"seed", -1},      {"shuffle", 1},
      {"hang_timeout_s", "slow"}, {"worker_executable", 3}, {"on_error", "ignore"},
      {"held_batches", true},   {"device_normalize_std", json{0.5, "x"}},
      {"device_normalize_mean", 0.5}, {"max_image_pixels", nullptr},
  };
  for (const auto& [name, value] : cases) {
    const std::string error = error_of(name, value);
    EXPECT_NE(error.find("loader option '" + name + "' must be"), std::string::npos)
        << name << " = " << value.dump() << ": " << error;
    EXPECT_NE(error.find(value.dump()), std::string::npos) << error;
  }
  EXPECT_NE(error_of("on_error", "ignore").find("one of \"raise\", \"skip\""),
            std::string::npos);
}

TEST(OptionSpecs, WellTypedValuesAreTaken) {
  LoaderOptions options;
  set_loader_option(options, "hang_timeout_s", 3);  // an integer is a number
  set_loader_option(options, "seed", json::parse("18446744073709551615"));
  set_loader_option(options, "rank", -1);
  set_loader_option(options, "max_image_pixels", int64_t{1} << 40);
  EXPECT_EQ(options.hang_timeout_s, 3.0);
  EXPECT_EQ(options.seed, ~uint64_t{0});
  EXPECT_EQ(options.rank, -1);
  EXPECT_EQ(options.max_image_pixels, int64_t{1} << 40);
}

TEST(OptionSpecs, ValidationRulesNameTheOption) {
  const auto problem = [](auto change) {
    LoaderOptions options;
    change(options);
    try {
      validate_loader_options(options);
    } catch (const OptionError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(problem([](LoaderOptions&) {}), "");
  EXPECT_EQ(problem([](LoaderOptions& o) { o.num_workers = LoaderOptions::kAutoWorkers; }), "");
  EXPECT_EQ(problem([](LoaderOptions& o) { o.batch_size = 0; }),
            "ringloader: batch_size must be positive, got 0");
  EXPECT_EQ(problem([](LoaderOptions& o) { o.batch_size = (1 << 24) + 1; }),
            "ringloader: batch_size 16777217 is too large");
  EXPECT_EQ(problem([](LoaderOptions& o) { o.num_workers = -2; }),
            "ringloader: num_workers must be >= 0 or kAutoWorkers, got -2");
  EXPECT_EQ(problem([](LoaderOptions& o) { o.ring_slots = 1; }),
            "ringloader: ring_slots must be 0 (automatic) or >= 2, got 1");
  EXPECT_EQ(problem([](LoaderOptions& o) { o.hang_timeout_s = -1; }),
            "ringloader: hang_timeout_s must be >= 0 (0 disables)");
  EXPECT_EQ(problem([](LoaderOptions& o) { o.poll_interval_s = 0; }),
            "ringloader: poll_interval_s must be positive");
  EXPECT_NE(problem([](LoaderOptions& o) { o.max_auto_workers = -1; }), "");
  EXPECT_NE(problem([](LoaderOptions& o) { o.intra_op_threads = -1; }), "");
  EXPECT_NE(problem([](LoaderOptions& o) { o.max_image_pixels = 0; }), "");
  EXPECT_NE(problem([](LoaderOptions& o) { o.timeout_s = -1; }), "");
  EXPECT_NE(problem([](LoaderOptions& o) { o.max_samples_per_epoch = -1; }), "");
  EXPECT_NE(problem([](LoaderOptions& o) { o.max_batch_retries = -1; }), "");
}

}  // namespace
}  // namespace ringloader
