# SPDX-License-Identifier: BSD-3-Clause
"""The package's modules import each other without a cycle (issue 25: the
dataloader.py <-> node.py cycle of AttachedDataLoader), and none assigns
another object's private fields (as _state.py, _stream.py and
_in_process.py did the DataLoader's). Read statically, so an import
inside a function counts too."""
import ast
import importlib
import os

import pytest

import ringloader

PACKAGE = os.path.dirname(os.path.abspath(ringloader.__file__))


def _module_files():
    """{dotted name under ringloader: path}; a package is its __init__."""
    found = {}
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if not d.startswith("__")]
        if folder != PACKAGE and "__init__.py" not in files:
            continue  # not a package (_spawn_hook: a sys.path entry)
        rel = os.path.relpath(folder, PACKAGE)
        prefix = "" if rel == "." else rel.replace(os.sep, ".")
        for name in files:
            if not name.endswith(".py") or name == "__main__.py":
                continue
            stem = name[:-3]
            if stem == "__init__":
                dotted = prefix or "__init__"
            else:
                dotted = f"{prefix}.{stem}" if prefix else stem
            found[dotted] = os.path.join(folder, name)
    return found


FILES = _module_files()
MODULES = sorted(FILES)


def _resolve(dotted):
    """The package module that `ringloader.<dotted>` names (longest match)."""
    parts = dotted.split(".")
    while parts:
        name = ".".join(parts)
        if name in FILES:
            return name
        parts.pop()
    return None


def _imports(module):
    """The package's modules `module` imports (any depth in its code)."""
    with open(FILES[module]) as source:
        tree = ast.parse(source.read())
    is_package = FILES[module].endswith("__init__.py")
    here = [] if module == "__init__" else module.split(".")
    package = here if is_package else here[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package[:len(package) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            elif node.module == "ringloader" or (node.module or "").startswith("ringloader."):
                base = node.module.removeprefix("ringloader").lstrip(".")
            else:
                continue
            prefix = "ringloader." + base if base else "ringloader"
            # from x import y: y may be a module of x, or a name in x.
            names = [prefix + "." + alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("ringloader."):
                target = _resolve(name[len("ringloader."):])
                if target is None and name.count(".") > 1:
                    target = _resolve(name.rsplit(".", 1)[0][len("ringloader."):])
                if target and target != module:
                    found.add(target)
    return found


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(module, path):
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[module] = "done"
        return None

    for module in graph:
        if module not in state:
            found = visit(module, [module])
            if found:
                return found
    return None


def test_no_module_imports_itself_through_others():
    # The package's __init__ imports its public modules; that is no cycle.
    graph = {m: _imports(m) for m in MODULES if m != "__init__"}
    assert "dataloader" in graph and "node" in graph
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_every_module_imports():
    for module in MODULES:
        if module != "__init__":
            importlib.import_module("ringloader." + module)
    assert "_workers.zygote" in MODULES and "_slots.batch_codec" in MODULES


# Private fields set from outside their class on purpose: torch's own
# worker info (what torch's workers set), and the memfds a converted
# dataset owns (set on it by the conversion that made it).
_ALLOWED_WRITES = {("_workers/worker.py", "torch_worker._worker_info"),
                   ("_workers/iterable_worker.py", "torch_worker._worker_info"),
                   ("_native/datasets.py", "owner._memfds")}


def test_no_module_assigns_another_objects_private_fields():
    found = []
    for module in MODULES:
        path = os.path.relpath(FILES[module], PACKAGE)
        with open(FILES[module]) as source:
            tree = ast.parse(source.read())
        own = {"self", "cls"} | {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            else:
                continue
            for target in targets:
                for part in ast.walk(target):
                    if not (isinstance(part, ast.Attribute) and part.attr.startswith("_")
                            and not part.attr.startswith("__")):
                        continue
                    if isinstance(part.value, ast.Name) and part.value.id in own:
                        continue  # its own fields
                    if (path, ast.unparse(part)) not in _ALLOWED_WRITES:
                        found.append(f"{path}:{node.lineno}: {ast.unparse(part)}")
    assert not found, found


# What each sub-package may import (its __init__ docstring says why): the
# workers hold only what the fork gave them, never trainer code; the slot
# formats are what both sides read and write, so they import neither side.
# A module not listed here (a public module, the trainer's) may import any.
SHARED = {"_ringloader", "_build_info"}
ALLOWED = {
    "_slots": SHARED | {"_slots"},
    "_workers": SHARED | {"_workers", "_slots", "_exceptions"},
    "_native": SHARED | {"_native", "_slots", "_exceptions", "transforms"},
}


def _area(module):
    return module.split(".")[0]


def _against_direction(graph):
    wrong = []
    for module, targets in sorted(graph.items()):
        allowed = ALLOWED.get(_area(module))
        if allowed is None:
            continue
        for target in sorted(targets):
            if _area(target) not in allowed:
                wrong.append(f"{module} imports {target}")
    return wrong


def test_no_module_imports_against_its_packages_direction():
    graph = {m: _imports(m) for m in MODULES}
    for area in ALLOWED:
        assert any(_area(m) == area for m in MODULES), area
    assert not _against_direction(graph), _against_direction(graph)


@pytest.mark.parametrize("importer, target", [("_workers.worker", "dataloader"),
                                              ("_workers.zygote", "_trainer.state"),
                                              ("_slots.collate", "_workers.worker"),
                                              ("_native.rows", "_trainer.arguments")])
def test_the_direction_check_sees_a_wrong_import(importer, target):
    # The check itself can fail: the real graph plus one wrong edge.
    graph = {m: _imports(m) for m in MODULES}
    graph[importer] = graph[importer] | {target}
    assert _against_direction(graph) == [f"{importer} imports {target}"]
