# SPDX-License-Identifier: BSD-3-Clause
"""Loader options: the C++ option table (loader/trainer/option_specs.cc,
include/ringloader/option_specs.h) is their one schema. DataLoader and
NodeLoader take their keyword defaults from it, and the native loader checks
every options dict against it (an unknown name or a wrong type raises
OptionError naming the option). python/tests/test_loader_option_specs.py
checks that this package agrees with the table."""
import json

from ringloader import _ringloader
from ringloader._ringloader import OptionError

# name -> {"name", "type", "default", "choices", "doc"}
SPECS = {spec["name"]: spec for spec in json.loads(_ringloader.loader_option_specs())}


def default(name):
    """The C++ default of option ``name`` (LoaderOptions{} in options.h)."""
    return SPECS[name]["default"]


def checked_choice(name, value):
    """`value`, one of choice option `name`'s spellings; else OptionError,
    here rather than where the native loader is made (an IterableDataset
    loader makes its workers' at iter())."""
    choices = SPECS[name]["choices"]
    if value not in choices:  # in the native check's words
        try:
            shown = json.dumps(value)
        except (TypeError, ValueError):
            shown = repr(value)
        raise OptionError(f"ringloader: loader option '{name}' must be one of "
                          f"{', '.join(json.dumps(c) for c in choices)}, got {shown}")
    return value
