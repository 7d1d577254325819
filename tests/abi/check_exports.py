# SPDX-License-Identifier: BSD-3-Clause
"""libringloader.so exports the public API and nothing more.

Reads the names include/ringloader/ marks RINGLOADER_EXPORT (classes,
structs and free functions of namespace ringloader) and checks, with
`nm -D --defined-only -C`, that every exported symbol of namespace
ringloader belongs to one of them: no internal namespace
(ringloader::transforms::, ::ring::, ::data::, ...) and no unmarked
function. Symbols where ringloader appears only inside template arguments
(std::vector<ringloader::Op>::...) are instantiations, not API, and are not
counted. A class the headers only declare (`class Impl;` inside Loader) is
internal even though it is nested in a public class (a nested class takes
its parent's visibility unless marked hidden): no symbol may name it. A few
names that must be there are checked too, so an empty export table fails.

    python3 tests/abi/check_exports.py LIBRARY INCLUDE_DIR
"""
import glob
import os
import re
import subprocess
import sys

REQUIRED = ["ringloader::Loader::Loader", "ringloader::Dataset::image_folder",
            "ringloader::Pipeline::from_json", "typeinfo for ringloader::OptionError",
            "ringloader::ToTensor()"]
PREFIXES = ("typeinfo name for ", "typeinfo for ", "vtable for ", "VTT for ",
            "non-virtual thunk to ", "virtual thunk to ", "guard variable for ")


def public_names(include_dir):
    names = set()
    for path in glob.glob(os.path.join(include_dir, "ringloader", "*.h")):
        text = open(path).read()
        names.update(re.findall(r"(?:class|struct) RINGLOADER_EXPORT (\w+)", text))
        names.update(re.findall(r"RINGLOADER_EXPORT\s+[^(;{]*?\b(\w+)\(", text))
    return names


def internal_names(include_dir):
    """Classes the public headers declare but never define (pimpls,
    friends): their members are not API wherever they are nested."""
    declared, defined = set(), set()
    for path in glob.glob(os.path.join(include_dir, "ringloader", "*.h")):
        text = open(path).read()
        declared.update(re.findall(r"\b(?:class|struct)\s+(\w+)\s*;", text))
        defined.update(re.findall(
            r"\b(?:class|struct)\s+(?:RINGLOADER_EXPORT\s+)?(\w+)\s*(?:final\s*)?[:{]", text))
    return declared - defined


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", library],
                         capture_output=True, text=True, check=True).stdout
    return [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]


def owner(symbol):
    """The first name after `ringloader::` when the symbol itself is in
    namespace ringloader (None when ringloader only appears in arguments)."""
    for prefix in PREFIXES:
        if symbol.startswith(prefix):
            symbol = symbol[len(prefix):]
    match = re.match(r"ringloader::(\w+)", symbol)
    return match.group(1) if match else None


def scopes(symbol):
    """The names of the symbol's own qualified name, outermost first
    (ringloader::Loader::Impl::next(...) -> Loader, Impl, next)."""
    for prefix in PREFIXES:
        if symbol.startswith(prefix):
            symbol = symbol[len(prefix):]
    match = re.match(r"ringloader::((?:\w+::)*\w+)", symbol)
    return match.group(1).split("::") if match else []


def main(library, include_dir):
    allowed = public_names(include_dir)
    hidden = internal_names(include_dir)
    symbols = exported(library)
    ours = [(s, owner(s)) for s in symbols if owner(s) is not None]
    bad = sorted(s for s, name in ours
                 if name not in allowed or hidden.intersection(scopes(s)))
    missing = [r for r in REQUIRED if not any(s.startswith(r) for s in symbols)]
    print(f"{len(ours)} exported ringloader symbols, {len(allowed)} public names, "
          f"internal nested classes: {', '.join(sorted(hidden))}")
    for s in bad[:40]:
        print(f"not public: {s}")
    for r in missing:
        print(f"missing: {r}")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
