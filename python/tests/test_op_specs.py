# SPDX-License-Identifier: BSD-3-Clause
"""The op spec table (transforms/op_specs.cc) is the one source of every op's
parameters: these tests check that its consumers agree with it."""
import importlib.util
import inspect
import json
import os
import pathlib

import pytest
import torchvision.transforms as tv
from torchvision import __version__ as tv_version

import ringloader.transforms as rt
from ringloader import _ringloader

SOURCE = pathlib.Path(os.environ.get("RINGLOADER_SOURCE_DIR",
                                     pathlib.Path(__file__).resolve().parents[2]))
# antialias: torchvision < 0.17 defaults to None ("the backend's default",
# which for PIL is antialiasing: true); from 0.17 on (torch 2.x) to True.
BACKEND_DEFAULTS = {("Resize", "antialias"), ("RandomResizedCrop", "antialias")}
_TV_VERSION = tuple(int(x) for x in tv_version.split("+")[0].split(".")[:2])


def _load_script():
    spec = importlib.util.spec_from_file_location("gen_op_docs",
                                                  SOURCE / "scripts" / "gen_op_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _plain(value):
    value = getattr(value, "value", value)  # InterpolationMode
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def test_docs_op_table_matches_the_spec_table():
    gen = _load_script()
    text = (SOURCE / "docs" / "transforms.md").read_text()
    expected = gen.with_table(text, gen.render(json.loads(_ringloader.op_specs())))
    assert text == expected, "docs/transforms.md is stale: run scripts/gen_op_docs.py"


def test_spec_defaults_are_torchvisions():
    checked = 0
    for name, op in rt.OP_SPECS.items():
        tv_class = getattr(tv, name, None)
        if tv_class is None:
            continue
        tv_params = inspect.signature(tv_class).parameters
        for param, spec in op["params"].items():
            if spec["required"] or param not in tv_params:
                continue
            if (name, param) in BACKEND_DEFAULTS and _TV_VERSION < (0, 17):
                assert tv_params[param].default is None
                assert spec["default"] is True, (name, param)
                continue
            assert spec["default"] == _plain(tv_params[param].default), (name, param)
            checked += 1
    assert checked >= 30


def test_python_classes_take_the_spec_defaults():
    for name, op in rt.OP_SPECS.items():
        cls = getattr(rt, name)
        params = inspect.signature(cls).parameters
        for param, spec in op["params"].items():
            if param not in params or (name, param) in BACKEND_DEFAULTS:
                continue
            default = params[param].default
            expected = None if spec["required"] else spec["default"]
            assert _plain(None if default is inspect.Parameter.empty else default) == \
                expected, (name, param)


def test_every_spec_op_is_supported_and_every_torchvision_name_has_a_spec():
    assert set(rt._TORCHVISION_CONVERTERS) <= set(rt.OP_SPECS)
    for name in rt.OP_SPECS:
        assert hasattr(rt, name)


def test_python_edge_lists_the_valid_choices():
    with pytest.raises(ValueError, match="expected one of: bicubic, bilinear, nearest"):
        rt.Resize(8, interpolation="lanczos")
    with pytest.raises(ValueError, match="constant, edge, reflect, symmetric"):
        rt.Pad(2, padding_mode="wrap")


def test_json_parser_errors_come_from_the_spec():
    def error(*ops):
        with pytest.raises(ValueError) as info:
            _ringloader.validate_pipeline(json.dumps(ops), "RGB", 32, 32)
        return str(info.value)
    assert "(parameters: p)" in error({"op": "RandomHorizontalFlip", "prob": 0.5})
    assert "must be in [0.000000, 1.000000]" in error({"op": "RandomGrayscale", "p": 2})
    assert "expected one of: random" in error(
        {"op": "ToTensor"}, {"op": "RandomErasing", "value": "noise"})
