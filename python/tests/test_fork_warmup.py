# SPDX-License-Identifier: BSD-3-Clause
"""What a fork of the trainer sheds and inherits on the way to a worker's
first batch: the modules whose import was running (found from importlib's
import locks, not by touching every module), and the libraries the trainer
imported, warmed once (numpy.random, Pillow's plugins) rather than in each
worker."""
import subprocess
import sys
import textwrap

from conftest import env_importing_ringloader
from ringloader._workers import fork_hygiene


def _run(code, tmp_path):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                            env=env_importing_ringloader(None), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.split()


def test_the_modules_being_imported_are_those_a_full_look_finds(tmp_path):
    # outer imports inner, whose body asks: both are mid-import then.
    (tmp_path / "outer_mod.py").write_text("import inner_mod\n")
    (tmp_path / "inner_mod.py").write_text(textwrap.dedent("""
        import sys
        from ringloader._workers import fork_hygiene
        SEEN = sorted(fork_hygiene._names_being_imported())
        FULL = sorted(name for name, module in list(sys.modules.items())
                      if getattr(getattr(module, "__spec__", None), "_initializing", False))
    """))
    seen, full, after = _run("""
        import outer_mod, inner_mod
        from ringloader._workers import fork_hygiene
        print(",".join(inner_mod.SEEN), ",".join(inner_mod.FULL),
              ",".join(fork_hygiene._names_being_imported()) or "-")
    """, tmp_path)
    assert {"inner_mod", "outer_mod"} <= set(seen.split(","))
    assert set(full.split(",")) <= set(seen.split(","))
    assert after == "-"  # no import runs now


def test_without_importlibs_lock_table_every_module_is_looked_at(monkeypatch):
    monkeypatch.setattr(fork_hygiene, "_import_locks", lambda: None)
    assert set(fork_hygiene._names_being_imported()) == set(sys.modules)


def test_pillow_and_numpy_random_are_warmed_only_where_the_trainer_has_them(tmp_path):
    warmed, = _run("""
        import sys
        import numpy, PIL.Image
        from ringloader._workers.library_warmup import warm_inherited_libraries
        warm_inherited_libraries()
        print("PIL.JpegImagePlugin" in sys.modules and "numpy.random" in sys.modules)
    """, tmp_path)
    assert warmed == "True"
    untouched, = _run("""
        import sys
        sys.modules["PIL"] = None  # Pillow as if not installed: nothing imports it
        from ringloader._workers.library_warmup import warm_inherited_libraries
        warm_inherited_libraries()
        print(sys.modules.get("PIL.Image") is None and sys.modules["PIL"] is None)
    """, tmp_path)
    assert untouched == "True"


def test_a_library_that_fails_its_warm_up_fails_no_loader(tmp_path):
    # A broken Pillow plugin: the warm-up goes on (the worker that opens an
    # image meets the error, naming the sample), import ringloader too.
    (tmp_path / "PIL").mkdir()
    (tmp_path / "PIL" / "__init__.py").write_text("")
    (tmp_path / "PIL" / "Image.py").write_text(
        "def preinit():\n    raise OSError('broken plugin')\n")
    survived, = _run("""
        import PIL.Image
        import ringloader
        from ringloader._workers.library_warmup import warm_inherited_libraries
        warm_inherited_libraries()
        print("survived")
    """, tmp_path)
    assert survived == "survived"


def test_a_waiting_spare_imports_pillow_where_the_trainer_has_webdataset(tmp_path):
    # _WarmUp's likely step runs only while the spare waits: finish() (its
    # payload came at once) leaves it to the worker, which may need no image.
    seen = _run("""
        import socket, sys, types
        assert "PIL.Image" not in sys.modules
        from ringloader._workers import worker_fork
        waits, never = socket.socketpair()
        worker_fork._WarmUp().finish()
        print("PIL.Image" in sys.modules)
        worker_fork._WarmUp().until_readable(waits)  # nothing comes: every step
        print("PIL.Image" in sys.modules)
        sys.modules["webdataset"] = types.ModuleType("webdataset")
        worker_fork._WarmUp().finish()
        print("PIL.Image" in sys.modules)
        worker_fork._WarmUp().until_readable(waits)
        print("PIL.Image" in sys.modules and "PIL.JpegImagePlugin" in sys.modules)
    """, tmp_path)
    assert seen == ["False", "False", "False", "True"]


def test_a_streams_worker_started_after_a_pause_has_pillow_at_its_first_item(tmp_path):
    # The trainer imported webdataset (a stand-in here), not Pillow; a script
    # builds its model between DataLoader() and iter(): the spares import
    # Pillow meanwhile, not at the first image.
    first, = _run("""
        import sys, time, types
        import torch
        sys.modules["webdataset"] = types.ModuleType("webdataset")
        from ringloader import DataLoader

        class Asks(torch.utils.data.IterableDataset):
            def __iter__(self):
                yield torch.tensor(int("PIL.Image" in sys.modules))

        if __name__ == "__main__":
            assert "PIL.Image" not in sys.modules
            loader = DataLoader(Asks(), batch_size=1, num_workers=1)
            time.sleep(2.0)
            print(",".join(str(int(batch)) for batch in loader))
    """, tmp_path)
    assert first == "1"
