// SPDX-License-Identifier: BSD-3-Clause
// The loader option table: every LoaderOptions field's name, type, one-line
// doc and checks, written once (loader/trainer/option_specs.cc); defaults
// come from LoaderOptions{} (options.h). Everything that sets options by name
// reads it: the Python binding (a dict of keyword values), Python's
// DataLoader and NodeLoader defaults (through _ringloader.loader_option_specs())
// and the drift test python/tests/test_loader_option_specs.py.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ringloader/export.h"
#include "ringloader/options.h"

namespace ringloader {

// The table as JSON, in declaration order: [{"name", "type", "default",
// "choices", "doc"}]. "type" is one of "int", "uint", "float", "bool",
// "string", "choice" (one string of "choices"), "floats" (a list).
RINGLOADER_EXPORT nlohmann::json loader_option_specs_json();

// Sets one option from a JSON value: integers for "int"/"uint" (within the
// field's range), any number for "float", true/false for "bool", a string for
// "string" and "choice" (one of its choices), a list of numbers for "floats".
// Throws OptionError naming the option when `name` is not in the table or
// `value` does not fit it. Range rules that need the whole configuration
// (validate_loader_options) are not checked here.
RINGLOADER_EXPORT void set_loader_option(LoaderOptions& options, const std::string& name,
                                         const nlohmann::json& value);

// Defaults, then every key of `values` (a JSON object) set as above.
RINGLOADER_EXPORT LoaderOptions loader_options_from_json(const nlohmann::json& values);

// Every option of `options` by name (choices as their strings).
RINGLOADER_EXPORT nlohmann::json loader_options_to_json(const LoaderOptions& options);

// Throws OptionError with the first table rule `options` breaks
// (batch_size > 0, ring_slots 0 or >= 2, ...). A Loader calls it at
// construction, after reading rank and world size from the environment.
RINGLOADER_EXPORT void validate_loader_options(const LoaderOptions& options);

}  // namespace ringloader
