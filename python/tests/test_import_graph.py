# SPDX-License-Identifier: BSD-3-Clause
"""The package's modules import each other without a cycle (issue 25: the
dataloader.py <-> node.py cycle of AttachedDataLoader), and none assigns
another object's private fields (as _state.py, _stream.py and
_in_process.py did the DataLoader's). Read statically, so an import
inside a function counts too."""
import ast
import importlib
import os

import ringloader

PACKAGE = os.path.dirname(os.path.abspath(ringloader.__file__))
MODULES = sorted(name[:-3] for name in os.listdir(PACKAGE)
                 if name.endswith(".py") and name != "__main__.py")


def _imports(module):
    """The package's modules `module` imports (any depth in its code)."""
    with open(os.path.join(PACKAGE, module + ".py")) as source:
        tree = ast.parse(source.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module != "ringloader" and not (
                    node.module or "").startswith("ringloader."):
                continue
            base = (node.module or "").removeprefix("ringloader").lstrip(".")
            if base:  # from .x import y / from ringloader.x import y
                names = ["ringloader." + base]
            else:     # from . import x, y / from ringloader import x
                names = ["ringloader." + alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("ringloader."):
                target = name.split(".")[1]
                if target in MODULES and target != module:
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


# Private fields set from outside their class on purpose: torch's own
# worker info (what torch's workers set), and the memfds a converted
# dataset owns (set on it by the conversion that made it).
_ALLOWED_WRITES = {("_worker.py", "torch_worker._worker_info"),
                   ("_iterable_worker.py", "torch_worker._worker_info"),
                   ("_native_datasets.py", "owner._memfds")}


def test_no_module_assigns_another_objects_private_fields():
    found = []
    for module in MODULES:
        path = module + ".py"
        with open(os.path.join(PACKAGE, path)) as source:
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
