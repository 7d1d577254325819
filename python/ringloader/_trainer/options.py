# SPDX-License-Identifier: BSD-3-Clause
"""Loader options: the C++ option table (loader/trainer/option_specs.cc,
include/ringloader/option_specs.h) is their one schema. DataLoader and
NodeLoader take their keyword defaults from it, and the native loader checks
every options dict against it (an unknown name or a wrong type raises
OptionError naming the option). python/tests/test_loader_option_specs.py
checks that this package agrees with the table."""
import json

from ringloader import _ringloader

# name -> {"name", "type", "default", "choices", "doc"}
SPECS = {spec["name"]: spec for spec in json.loads(_ringloader.loader_option_specs())}


def default(name):
    """The C++ default of option ``name`` (LoaderOptions{} in options.h)."""
    return SPECS[name]["default"]
