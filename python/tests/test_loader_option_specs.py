# SPDX-License-Identifier: BSD-3-Clause
"""The loader option table (loader/trainer/option_specs.cc) is the one schema
of the native loader's options: these tests check that the binding checks
against it and that the Python fronts (DataLoader, NodeLoader) and the C++
header's docs agree with it."""
import ast
import inspect
import os
import pathlib
import re

import pytest
import torch

import ringloader
from ringloader import _ringloader
from ringloader._trainer import options as _options

SOURCE = pathlib.Path(os.environ.get("RINGLOADER_SOURCE_DIR",
                                     pathlib.Path(__file__).resolve().parents[2]))
PACKAGE = SOURCE / "python" / "ringloader"

# Keyword argument -> option, where the two share a meaning and a default.
DATALOADER_KEYWORDS = {
    "batch_size": "batch_size", "num_workers": "num_workers",
    "pin_memory": "pin_memory", "drop_last": "drop_last", "timeout": "timeout_s",
    "ring_slots": "ring_slots", "on_error": "on_error",
    "hang_timeout": "hang_timeout_s", "max_batch_retries": "max_batch_retries",
    "held_batches": "held_batches", "device": "device",
    "max_auto_workers": "max_auto_workers",
    "ring_memory_budget_bytes": "ring_memory_budget_bytes",
    "worker_nice": "worker_nice",
}
NODE_KEYWORDS = {
    "batch_size": "batch_size", "shuffle": "shuffle", "num_workers": "num_workers",
    "drop_last": "drop_last", "seed": "seed", "on_error": "on_error",
    "ring_slots": "ring_slots", "hang_timeout": "hang_timeout_s",
    "worker_nice": "worker_nice",
}


def _keys_written(path):
    """String keys a module puts into a dict named ``options``: literal
    ``options = {...}`` displays and ``options["key"] = ...`` stores."""
    keys = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Name) and target.id == "options"
                        and isinstance(node.value, ast.Dict)):
                    keys.update(k.value for k in node.value.keys
                                if isinstance(k, ast.Constant))
                if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                        and target.value.id == "options"
                        and isinstance(target.slice, ast.Constant)):
                    keys.add(target.slice.value)
    return keys


def test_every_option_the_package_sets_is_in_the_table():
    written = set()
    for name in ("dataloader.py", "node.py", "_trainer/device.py", "_trainer/distributed.py"):
        written |= _keys_written(PACKAGE / name)
    assert {"batch_size", "hang_timeout_s", "device"} <= written  # the scan works
    assert written <= set(_options.SPECS), written - set(_options.SPECS)


@pytest.mark.parametrize("function, keywords", [
    (ringloader.DataLoader.__init__, DATALOADER_KEYWORDS),
    (ringloader.NodeLoader.__init__, NODE_KEYWORDS),
])
def test_keyword_defaults_are_the_tables(function, keywords):
    parameters = inspect.signature(function).parameters
    for keyword, option in keywords.items():
        default = parameters[keyword].default
        assert default == _options.default(option), (keyword, option)
        assert type(default) is type(_options.default(option)) or option in (
            "timeout_s",), (keyword, option)  # torch's timeout=0 is an int


def _header_defaults():
    """option -> the text after "Default:" in the comment above its field
    (or above the group of fields it is declared with) in options.h."""
    text = (SOURCE / "include" / "ringloader" / "options.h").read_text()
    body = text[text.index("struct RINGLOADER_EXPORT LoaderOptions"):]
    defaults, comment, group = {}, [], []
    for line in body.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("//"):
            if group:
                comment, group = [], []
            comment.append(stripped[2:].strip())
            continue
        match = re.match(r"[\w:<>]+(?:<[\w:]+>)? (\w+)(?: = .*)?;$", stripped)
        if not match:
            comment, group = [], []
            continue
        group.append(match.group(1))
        found = re.search(r"Default: ([^ .(]+(?:\.\d+)?)", " ".join(comment))
        for name in group:
            defaults[name] = found.group(1) if found else None
    return defaults


def _as_value(text, spec):
    if spec["type"] == "choice":
        return text[1:].lower() if text.startswith("k") else text.strip('"')
    if spec["type"] == "string":
        return text.strip('"')
    if spec["type"] == "bool":
        return {"true": True, "false": False}[text]
    if spec["type"] == "floats":
        return [] if text == "[]" else text
    return float(text)


def test_header_documents_every_option_with_the_tables_default():
    documented = _header_defaults()
    for name, spec in _options.SPECS.items():
        assert name in documented, f"options.h has no field {name}"
        assert documented[name] is not None, f"options.h: {name} has no 'Default:' line"
        assert _as_value(documented[name], spec) == spec["default"], (name, documented[name])
        assert spec["doc"], name
    assert set(documented) == set(_options.SPECS), set(documented) ^ set(_options.SPECS)


def test_hang_timeout_default_comes_from_cpp():
    assert _options.default("hang_timeout_s") == 120.0
    for path in ("dataloader.py", "node.py"):
        assert "120" not in (PACKAGE / path).read_text(), path


@pytest.mark.parametrize("options, named", [
    ({"bogus_option": 1}, "bogus_option"),
    ({"batch_size": "8"}, "batch_size"),
    ({"batch_size": 2.5}, "batch_size"),
    ({"shuffle": 1}, "shuffle"),
    ({"seed": -1}, "seed"),
    ({"num_workers": 2 ** 40}, "num_workers"),
    ({"hang_timeout_s": "slow"}, "hang_timeout_s"),
    ({"on_error": "ignore"}, "on_error"),
    ({"held_batches": True}, "held_batches"),
    ({"device_normalize_mean": [0.5, "x"]}, "device_normalize_mean"),
    ({"device": object()}, "device"),
])
def test_unknown_or_mistyped_options_raise_naming_the_option(options, named):
    with pytest.raises(ringloader.OptionError, match=f"'{named}'"):
        _ringloader.epoch_order(10, options, 0)
    with pytest.raises(ringloader.OptionError, match=f"'{named}'"):
        _ringloader.NativeLoader("{}", "[]", options)


def test_well_typed_options_pass_as_before():
    import numpy as np
    order = _ringloader.epoch_order(10, {"seed": 2 ** 64 - 1, "shuffle": True,
                                         "batch_size": np.int64(2), "rank": -1,
                                         "hang_timeout_s": 3, "world_size": 1}, 0)
    assert sorted(order) == list(range(10))


class _Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(4))


@pytest.mark.parametrize("dataset", [torch.utils.data.TensorDataset(torch.arange(4)),
                                     _Stream()], ids=["map", "iterable"])
def test_an_unknown_choice_is_refused_by_the_constructor_in_the_native_words(dataset):
    """An IterableDataset loader makes its native loaders only at iter():
    its choices are checked at construction all the same."""
    with pytest.raises(ringloader.OptionError,
                       match="loader option 'held_batches' must be one of \"spill\", "
                             "\"raise\", got \"keep\""):
        ringloader.DataLoader(dataset, batch_size=2, num_workers=1, held_batches="keep")
