# SPDX-License-Identifier: BSD-3-Clause
"""The torch ringloader was built against, and what happens under another
one (issue 26): never a silent corruption, one ImportError naming both
versions and the fix."""
import glob
import importlib.util
import os
import subprocess
import sys
import textwrap

import torch

import ringloader
from ringloader import _build_info

FAKE_VERSION = "9.9.9+other"


def _refusal(result):
    """The one ImportError line the child printed, naming both versions."""
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert line.startswith("IMPORT-ERROR:"), result.stdout + result.stderr
    assert FAKE_VERSION in line and torch.__version__ in line
    return line


def test_built_against_the_torch_this_python_imports():
    assert _build_info.TORCH_VERSION == torch.__version__
    assert _build_info.CXX11_ABI == int(torch._C._GLIBCXX_USE_CXX11_ABI)
    assert os.path.isdir(ringloader.cmake_prefix_path) or not _installed()


def _installed():
    """True for a pip-installed package (its lib/ next to it)."""
    return os.path.isdir(os.path.join(os.path.dirname(ringloader.__file__), "lib"))


def _fake_torch(tmp_path):
    """A folder whose torch package reports another version."""
    package = tmp_path / "fake" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"__version__ = {FAKE_VERSION!r}\n")
    return str(tmp_path / "fake")


def _run(code):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_another_torch_raises_one_import_error_naming_both_and_the_fix(tmp_path):
    result = _run(f"""
        import sys
        sys.path.insert(0, {_fake_torch(tmp_path)!r})
        try:
            import ringloader
        except ImportError as error:
            print("IMPORT-ERROR:", error)
            assert "ringloader._ringloader" not in sys.modules, "extension loaded"
        else:
            print("IMPORTED")
    """)
    line = _refusal(result)
    assert "pip install --no-build-isolation" in line and "Torch_DIR" in line


def test_the_extension_alone_refuses_another_torch(tmp_path):
    # Imported directly (not through the package), the extension checks too.
    spec = importlib.util.find_spec("ringloader")
    (extension,) = glob.glob(os.path.join(spec.submodule_search_locations[0],
                                          "_ringloader*.so"))
    result = _run(f"""
        import importlib.util, sys
        sys.path.insert(0, {_fake_torch(tmp_path)!r})
        import torch
        spec = importlib.util.spec_from_file_location("_ringloader", {extension!r})
        try:
            # pybind11 3 (torch 2.x's) initialises in two phases: the
            # module's body, and so the check, runs in exec_module.
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        except ImportError as error:
            print("IMPORT-ERROR:", error)
        else:
            print("IMPORTED")
    """)
    line = _refusal(result)
    assert "pip install --no-build-isolation" in line
